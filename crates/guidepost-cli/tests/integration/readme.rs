//! Every shell block of the README, run as a reader runs it from the repository root.
//!
//! Each ```` ```sh ```` block runs with `bash -eo pipefail`, with this build's `guidepost` first on
//! the `PATH`, in a scratch folder that looks like the repository root (links to `examples/`,
//! `bench/`, `schema/`, `crates/`, `scripts/`, and an empty `target/`), so the files a block
//! writes (`target/agent.schema.json`, `.guidepost/`, `.tally/`) land there. After the
//! blocks ran, the test checks that each wrote only under `target/` or into folders
//! `.gitignore` names, so a reader's checkout stays clean. A comment on the line before a block says how it runs
//! (`<!-- readme-test: MODE -->`):
//!
//! - no comment: as written;
//! - `replay`: model calls are answered from `examples/recordings` (what a live model would
//!   answer there takes minutes on the CI's CPU): `GUIDEPOST_LLM_CACHE=replay-or-fail`, and
//!   `simulate` gets `--cache replay-or-fail`;
//! - `background`: each `guidepost serve` command runs until it says `listening on`, then is
//!   stopped; fixed ports become free ones, and the fake model server stands in for the model;
//! - `server` (`server with-keys`): a `guidepost serve examples/agents` (with API keys,
//!   exported to the block as `ADMIN_KEY` and `CLIENT_KEY`) runs on a free port, which
//!   replaces port 8800 in the block; `server shows-reply`: the block's output must also hold
//!   the text of the agent's reply, as the server stored it;
//! - `wheel`: the Python wheel's install as a user runs it, from the suite's own wheel
//!   (`GUIDEPOST_WHEEL`) instead of the release build `scripts/wheel.sh` makes; each
//!   `guidepost serve` runs until it says `listening on`, as in `background`;
//! - `tools`: `guidepost tools serve` runs on a free port in the background, and the other
//!   commands get a copy of the agent folder they name (`examples/python-tools`) whose tool
//!   service is that port; the fake model server stands in for the model;
//! - `parlant`: `http://localhost:8800` is the captured Parlant 3.3.2 server, replayed
//!   (`tests/fixtures/parlant-3.3.2`);
//! - `skip: REASON`: not run (the README's own two commands, hosted models, shell setup).
//!
//! Blocks that need `$GUIDEPOST_DATABASE_URL` get the test database
//! (`GUIDEPOST_TEST_DATABASE_URL`) or are left out when there is none, unless
//! `GUIDEPOST_REQUIRE_POSTGRES=1`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::repo_root;
use crate::serve::{FakeModel, bin, fake_model};

/// How a block runs.
#[derive(Debug, Clone, PartialEq)]
enum Mode {
    AsWritten,
    Replay,
    Background,
    Wheel,
    Tools,
    Parlant,
    Server { keys: bool, shows_reply: bool },
    Skip(String),
}

#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    mode: Mode,
    /// The commands, continuation lines joined.
    commands: Vec<String>,
}

fn parse_mode(comment: &str) -> Option<Mode> {
    let inner = comment.trim().strip_prefix("<!-- readme-test:")?.strip_suffix("-->")?.trim();
    Some(match inner {
        "replay" => Mode::Replay,
        "background" => Mode::Background,
        "wheel" => Mode::Wheel,
        "tools" => Mode::Tools,
        "parlant" => Mode::Parlant,
        "server" => Mode::Server { keys: false, shows_reply: false },
        "server with-keys" => Mode::Server { keys: true, shows_reply: false },
        "server shows-reply" => Mode::Server { keys: false, shows_reply: true },
        other => match other.strip_prefix("skip:") {
            Some(reason) if !reason.trim().is_empty() => Mode::Skip(reason.trim().to_string()),
            _ => panic!("unknown readme-test mode `{other}`"),
        },
    })
}

fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "```sh" {
            let mode = (1..=2)
                .filter_map(|back| i.checked_sub(back).map(|j| lines[j]))
                .find(|l| !l.trim().is_empty())
                .and_then(parse_mode)
                .unwrap_or(Mode::AsWritten);
            let start = i + 1;
            let mut commands = Vec::new();
            let mut current = String::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                let line = lines[i];
                match line.strip_suffix('\\') {
                    Some(head) => {
                        current.push_str(head);
                        current.push(' ');
                    }
                    None => {
                        current.push_str(line);
                        if !current.trim().is_empty() && !current.trim_start().starts_with('#') {
                            commands.push(std::mem::take(&mut current));
                        }
                        current.clear();
                    }
                }
                i += 1;
            }
            out.push(Block { line: start, mode, commands });
        }
        i += 1;
    }
    out
}

/// `command` without a trailing `# comment` (a `#` after whitespace; `#` inside a model spec
/// stays).
fn strip_comment(command: &str) -> &str {
    match command.find(" #") {
        Some(i) => command[..i].trim_end(),
        None => command.trim_end(),
    }
}

/// A scratch folder that looks like the repository root.
fn scratch_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    for name in ["examples", "bench", "schema", "crates", "scripts"] {
        std::os::unix::fs::symlink(root.join(name), dir.path().join(name)).unwrap();
    }
    // A `target/` of its own, where the README's commands write what they make.
    std::fs::create_dir(dir.path().join("target")).unwrap();
    dir
}

fn path_with_guidepost() -> String {
    let bin_dir = bin().parent().unwrap().to_path_buf();
    format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default())
}

fn database_url() -> Option<String> {
    std::env::var("GUIDEPOST_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty())
}

fn shell(cwd: &Path, script: &str) -> Command {
    // A hang guard, not a measure: a block that hangs fails after twenty minutes instead of
    // holding the suite. The README's commands are sized to take far less on a busy machine.
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", "1200", "bash", "-c"])
        .arg(format!("set -eo pipefail\n{script}"))
        .current_dir(cwd)
        .env("PATH", path_with_guidepost())
        .env_remove("GUIDEPOST_MODEL")
        .env_remove("GUIDEPOST_EMBEDDER")
        .env_remove("GUIDEPOST_API_KEYS")
        .env_remove("GUIDEPOST_DATABASE_URL")
        .stdin(Stdio::null());
    if let Some(url) = database_url() {
        cmd.env("GUIDEPOST_DATABASE_URL", url);
    }
    cmd
}

fn model_env(cmd: &mut Command, fake: &FakeModel) {
    cmd.env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url));
}

/// Runs a block to its end; its standard output.
fn run_to_end(mut cmd: Command, block: &Block) -> String {
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "README.md:{} ({:?}) failed: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        block.line,
        block.mode,
        block.commands,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `GET http://{address}{path}` with curl, as JSON.
fn get_json(address: &str, path: &str) -> serde_json::Value {
    let output =
        Command::new("curl").args(["-s", "--max-time", "60"]).arg(format!("http://{address}{path}")).output().unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("GET {path}: {e}: {}", String::from_utf8_lossy(&output.stdout)))
}

/// The texts of every agent message the server at `address` holds.
fn agent_replies(address: &str) -> Vec<String> {
    let sessions = get_json(address, "/sessions");
    let mut replies = Vec::new();
    for session in sessions.as_array().into_iter().flatten() {
        let id = session["id"].as_str().unwrap_or_default();
        let events = get_json(address, &format!("/sessions/{id}/events?source=ai_agent&kinds=message&wait_for_data=0"));
        replies.extend(
            events.as_array().into_iter().flatten().filter_map(|e| e["data"]["message"].as_str()).map(String::from),
        );
    }
    replies
}

/// Asserts `output` shows the agent's reply: a line that is the text of one of the agent's
/// messages on the server at `address`.
fn assert_shows_reply(output: &str, address: &str, what: &str) {
    let replies = agent_replies(address);
    assert!(!replies.is_empty(), "{what}: the agent sent no message; the commands printed:\n{output}");
    assert!(
        output.lines().any(|line| replies.iter().any(|r| r.trim() == line.trim())),
        "{what}: the agent's reply {replies:?} is not in what the commands printed:\n{output}"
    );
}

/// Replay: every model call from the recordings.
fn replayed(command: &str) -> String {
    let command = strip_comment(command);
    if !command.contains("guidepost simulate") {
        return command.to_string();
    }
    let mut words: Vec<String> = command.split_whitespace().map(String::from).collect();
    match words.iter().position(|w| w == "--cache") {
        Some(i) if i + 1 < words.len() => words[i + 1] = "replay-or-fail".into(),
        _ => words.extend(["--cache".into(), "replay-or-fail".into()]),
    }
    words.push("--no-progress".into());
    words.join(" ")
}

/// Background: fixed ports become free ones.
fn on_free_port(command: &str) -> String {
    let command = strip_comment(command);
    let mut words: Vec<String> = command.split_whitespace().map(String::from).collect();
    match words.iter().position(|w| w == "--port") {
        Some(i) if i + 1 < words.len() => words[i + 1] = "0".into(),
        _ => words.extend(["--port".into(), "0".into()]),
    }
    words.join(" ")
}

/// Kills the process group of a block's shell when dropped.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        // `--`: a negative number names a process group, not an option.
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status();
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `script` in its own process group and waits for `count` lines containing `marker`
/// on its standard output.
fn start_until(mut cmd: Command, count: usize, marker: &str, what: &str) -> (Group, Vec<String>) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let group = Group(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (etx, erx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = etx.send(line);
        }
    });
    let mut found = Vec::new();
    while found.len() < count {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains(marker) => found.push(line),
            Ok(_) => {}
            Err(_) => panic!(
                "{what}: {} of {count} `{marker}` lines within 60 s; stderr:\n{}",
                found.len(),
                erx.try_iter().collect::<Vec<_>>().join("\n")
            ),
        }
    }
    (group, found)
}

fn run_block(block: &Block, cwd: &Path, fake: &FakeModel) {
    match &block.mode {
        Mode::Skip(_) => {}
        Mode::AsWritten => {
            let mut cmd = shell(cwd, &block.commands.join("\n"));
            cmd.env_remove("GUIDEPOST_LLM_CACHE");
            run_to_end(cmd, block);
        }
        Mode::Replay => {
            let script: Vec<String> = block.commands.iter().map(|c| replayed(c)).collect();
            let mut cmd = shell(cwd, &script.join("\n"));
            cmd.env("GUIDEPOST_LLM_CACHE", "replay-or-fail").env("GUIDEPOST_LLM_RECORDINGS", "examples/recordings");
            run_to_end(cmd, block);
        }
        Mode::Background => {
            let mut script = Vec::new();
            let mut servers = 0;
            for command in &block.commands {
                if command.contains("GUIDEPOST_DATABASE_URL") && database_url().is_none() {
                    assert!(
                        std::env::var("GUIDEPOST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                        "README.md:{}: no test database for `{command}`",
                        block.line
                    );
                    eprintln!("README.md:{}: left out (no test database): {command}", block.line);
                    continue;
                }
                if command.contains("guidepost serve") {
                    // Each server in a data folder of its own, in the background.
                    servers += 1;
                    script.push(format!("{} --data-dir .guidepost-{servers} &", on_free_port(command)));
                } else {
                    script.push(strip_comment(command).to_string());
                }
            }
            if servers == 0 {
                return;
            }
            script.push("wait".into());
            let mut cmd = shell(cwd, &script.join("\n"));
            model_env(&mut cmd, fake);
            let (_group, _) = start_until(cmd, servers, "listening on http://", &format!("README.md:{}", block.line));
        }
        Mode::Wheel => run_wheel_block(block, cwd, fake),
        Mode::Tools => run_tools_block(block, cwd, fake),
        Mode::Parlant => {
            let (url, missed, _runtime) = crate::parlant_import::replayed();
            let script: Vec<String> =
                block.commands.iter().map(|c| strip_comment(c).replace("http://localhost:8800", &url)).collect();
            run_to_end(shell(cwd, &script.join("\n")), block);
            assert!(missed.lock().unwrap().is_empty(), "README.md:{}: not captured: {missed:?}", block.line);
        }
        Mode::Server { keys, shows_reply } => {
            let admin = "readme-admin-key-0123456789abcdef";
            let client = "readme-client-key-0123456789abcdef";
            let mut server = shell(cwd, "exec guidepost serve examples/agents --port 0");
            model_env(&mut server, fake);
            if *keys {
                server.env("GUIDEPOST_API_KEYS", format!("admin:{admin},client:{client}"));
            }
            let (_server, lines) = start_until(server, 1, "listening on http://", "the README's server");
            let address = lines[0].trim().trim_start_matches("listening on http://").to_string();
            let script = block
                .commands
                .iter()
                .map(|c| c.replace("localhost:8800", &address).replace("127.0.0.1:8800", &address))
                .collect::<Vec<_>>()
                .join("\n");
            let mut cmd = shell(cwd, &script);
            cmd.env("ADMIN_KEY", admin).env("CLIENT_KEY", client);
            let output = run_to_end(cmd, block);
            if *shows_reply {
                assert_shows_reply(&output, &address, &format!("README.md:{}", block.line));
            }
        }
    }
}

/// The wheel's install: the suite's wheel stands in for the release build.
fn run_wheel_block(block: &Block, cwd: &Path, fake: &FakeModel) {
    let Some(wheel) = std::env::var("GUIDEPOST_WHEEL").ok().filter(|w| !w.is_empty()) else {
        assert!(
            std::env::var("GUIDEPOST_REQUIRE_WHEEL").as_deref() != Ok("1"),
            "README.md:{}: GUIDEPOST_WHEEL is not set",
            block.line
        );
        eprintln!("README.md:{}: left out (no wheel: scripts/wheel.sh --from-debug-build)", block.line);
        return;
    };
    let mut script = Vec::new();
    let mut servers = 0;
    for command in &block.commands {
        let command = strip_comment(command);
        if command.starts_with("scripts/wheel.sh") {
            continue;
        }
        let command = command.replace("target/wheels/guidepost-*.whl", &wheel);
        if command.contains("guidepost serve") {
            servers += 1;
            script.push(format!("{} &", on_free_port(&command)));
        } else {
            script.push(command);
        }
    }
    assert!(servers > 0, "README.md:{}: a wheel block serves something", block.line);
    script.push("wait".into());
    let mut cmd = shell(cwd, &script.join("\n"));
    // The quick start serves from the embedded SQLite store.
    cmd.env_remove("GUIDEPOST_DATABASE_URL");
    model_env(&mut cmd, fake);
    start_until(cmd, servers, "listening on http://", &format!("README.md:{}", block.line));
}

/// Python tools served on a free port, and the agent folder the block names pointed at it.
fn run_tools_block(block: &Block, cwd: &Path, fake: &FakeModel) {
    let (serve, rest): (Vec<&String>, Vec<&String>) =
        block.commands.iter().partition(|c| c.contains("guidepost tools serve"));
    assert_eq!(serve.len(), 1, "README.md:{}: one `guidepost tools serve`", block.line);
    let server = shell(cwd, &format!("exec {}", on_free_port(serve[0])));
    let (_server, lines) = start_until(server, 1, "listening on http://", &format!("README.md:{}", block.line));
    let url = lines[0].trim().trim_start_matches("listening on ").to_string();
    let agent = std::fs::read_to_string(repo_root().join("examples/python-tools/agent.yaml")).unwrap();
    // The copy lives outside the checkout, which must hold only what the commands made.
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join("agent.yaml"), agent.replace("http://127.0.0.1:8089", &url)).unwrap();
    let folder = copy.path().display().to_string();
    let script: Vec<String> = rest.iter().map(|c| strip_comment(c).replace("examples/python-tools", &folder)).collect();
    let mut cmd = shell(cwd, &script.join("\n"));
    model_env(&mut cmd, fake);
    run_to_end(cmd, block);
}

#[test]
fn every_shell_block_of_the_readme_runs() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let blocks = blocks(&readme);
    assert!(blocks.len() >= 10, "{blocks:?}");
    // Every block that is not run says why.
    let skipped: Vec<(usize, String)> = blocks
        .iter()
        .filter_map(|b| match &b.mode {
            Mode::Skip(reason) => Some((b.line, reason.clone())),
            _ => None,
        })
        .collect();
    assert!(skipped.len() <= 4, "too many README blocks left out: {skipped:?}");
    let fake = fake_model();
    let ignored = ignored_names();
    for block in &blocks {
        let scratch = scratch_root();
        let started = std::time::Instant::now();
        run_block(block, scratch.path(), &fake);
        eprintln!("README.md:{} ({:?}): {:.1} s", block.line, block.mode, started.elapsed().as_secs_f64());
        for entry in std::fs::read_dir(scratch.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            // The links and `target/` the scratch folder starts with, the data folders this
            // test gives background servers, and what `.gitignore` covers.
            let expected = ["examples", "bench", "schema", "crates", "scripts", "target"].contains(&name.as_str())
                || (block.mode == Mode::Background && name.starts_with(".guidepost-"))
                || ignored.iter().any(|pattern| pattern.matches(&name));
            assert!(expected, "README.md:{}: the commands left `{name}` in the checkout", block.line);
        }
    }
}

/// A top-level pattern of `.gitignore`: `/name`, `name` or `*suffix`.
struct Ignored(String);

impl Ignored {
    fn matches(&self, name: &str) -> bool {
        match self.0.strip_prefix('*') {
            Some(suffix) => name.ends_with(suffix),
            None => self.0 == name,
        }
    }
}

/// The patterns of the repository's `.gitignore` that name top-level files or folders.
fn ignored_names() -> Vec<Ignored> {
    std::fs::read_to_string(repo_root().join(".gitignore"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| Ignored(l.trim_start_matches('/').trim_end_matches('/').to_string()))
        .collect()
}

/// The hint `scripts/run.sh` prints before it serves, pasted as a reader pastes it, shows the
/// agent's reply.
#[test]
fn the_hint_of_the_run_script_shows_the_agents_reply() {
    let fake = fake_model();
    let scratch = scratch_root();
    let mut server = shell(scratch.path(), "exec guidepost serve examples/agents --port 0");
    model_env(&mut server, &fake);
    let (_server, lines) = start_until(server, 1, "listening on http://", "the server");
    let address = lines[0].trim().trim_start_matches("listening on http://").to_string();
    let port = address.rsplit(':').next().unwrap().to_string();
    // The hint as the script prints it: its here-document, expanded by bash for this port.
    let printed = Command::new("bash")
        .args(["-c", r#"port=$1; eval "$(sed -n '/^cat >&2 <<HELP/,/^HELP$/p' scripts/run.sh)" 2>&1"#, "hint"])
        .arg(&port)
        .current_dir(repo_root())
        .output()
        .unwrap();
    let hint = String::from_utf8_lossy(&printed.stdout).into_owned();
    // The commands are its indented lines.
    let commands: Vec<&str> = hint.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(commands.iter().any(|c| c.contains("wait_for_data")), "no commands in the hint:\n{hint}");
    let output = run_to_end(
        shell(scratch.path(), &commands.join("\n")),
        &Block { line: 0, mode: Mode::AsWritten, commands: vec![hint.clone()] },
    );
    assert_shows_reply(&output, &address, "the hint of scripts/run.sh");
}

#[test]
fn the_readme_parser_reads_modes_and_continuations() {
    let text = "intro\n\n<!-- readme-test: replay -->\n```sh\nguidepost chat x.yaml \\\n    --quiet  # note\n# a comment\n```\n\n```sh\necho hi\n```\n";
    let parsed = blocks(text);
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed[0].mode, Mode::Replay);
    assert_eq!(parsed[0].commands.len(), 1);
    assert_eq!(strip_comment(&parsed[0].commands[0]), "guidepost chat x.yaml      --quiet");
    assert_eq!(parsed[1].mode, Mode::AsWritten);
    assert_eq!(
        replayed("guidepost simulate s --cache record"),
        "guidepost simulate s --cache replay-or-fail --no-progress"
    );
    assert_eq!(on_free_port("guidepost serve a --port 8801"), "guidepost serve a --port 0");
    assert_eq!(on_free_port("guidepost serve a # b"), "guidepost serve a --port 0");
}
