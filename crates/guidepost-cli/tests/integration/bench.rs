//! `guidepost bench --conversations`: the demo conversations through `guidepost serve`
//! child processes, here on the fake OpenAI-compatible model.

use crate::guidepost;
use crate::serve::{bin, fake_model};

/// A conversations file in `dir` with one conversation with the example taxi agent, its
/// customer messages `turns` (YAML strings, comma-separated).
fn taxi_conversation(dir: &std::path::Path, turns: &str) -> std::path::PathBuf {
    let file = dir.join("conversations.yaml");
    let agents = crate::repo_root().join("examples/agents");
    let text =
        format!("agents: {}\nconversations:\n  - id: taxi\n    agent: taxi\n    turns: [{turns}]\n", agents.display());
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn the_conversations_bench_reports_every_turn_of_every_server() {
    let fake = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let file = taxi_conversation(dir.path(), r#""I need a taxi", "12 Oak Street""#);
    let logs = dir.path().join("logs");
    let output = guidepost()
        .args(["bench", "--conversations"])
        .arg(&file)
        .arg("--server")
        .arg(bin())
        .arg("--server")
        .arg(bin())
        .arg("--server-logs")
        .arg(&logs)
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Two turns on each of the two servers, each with its model calls counted from the turn's
    // trace.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| taxi |") && l.matches('|').count() == 13)
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in &rows {
        let calls: u64 = row[5].parse().unwrap_or_else(|_| panic!("calls in {row:?}"));
        assert!(calls > 0, "{row:?}");
        let prompt: u64 = row[6].parse().unwrap();
        let new: u64 = row[7].parse().unwrap();
        assert!(new <= prompt && prompt > 0, "{row:?}");
    }
    assert_eq!(rows.iter().filter(|r| r[2] == "1").count(), 2, "server 1 ran both turns");
    assert!(stdout.contains("## Side by side"), "{stdout}");
    assert!(stdout.contains("## Replies"), "{stdout}");
    assert!(logs.join("server-1.log").is_file() && logs.join("server-2.log").is_file());
    let log = std::fs::read_to_string(logs.join("server-1.log")).unwrap();
    assert!(log.contains("agent taxi"), "{log}");
}

#[test]
fn a_bad_conversations_file_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversations.yaml");
    std::fs::write(&file, "agents: .\nconversations: []\n").unwrap();
    let output = guidepost().args(["bench", "--conversations"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("conversations.yaml") && stderr.contains("`conversations` is empty"), "{stderr}");
}

/// The processes whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                // The parent is the second field after the command, which is in parentheses.
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

#[test]
fn a_bench_asked_to_stop_stops_the_servers_it_started() {
    let fake = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let file = taxi_conversation(dir.path(), r#""I need a taxi""#);
    // The customer takes ten minutes to write: the bench waits with its server running.
    let bench = std::process::Command::new(bin())
        .args(["bench", "--conversations"])
        .arg(&file)
        .args(["--writing-secs", "600"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut servers = Vec::new();
    for _ in 0..600 {
        servers = children_of(bench.id());
        if !servers.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!servers.is_empty(), "the bench started no server");
    let term = std::process::Command::new("kill").args(["-TERM", &bench.id().to_string()]).status().unwrap();
    assert!(term.success());
    let output = bench.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    for server in servers {
        assert!(!std::path::Path::new(&format!("/proc/{server}")).exists(), "server {server} still runs: {stderr}");
    }
}
