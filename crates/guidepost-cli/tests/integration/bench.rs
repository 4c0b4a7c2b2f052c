//! `guidepost bench --conversations`: the demo conversations through `guidepost serve`
//! child processes, here on the fake OpenAI-compatible model.

use crate::guidepost;
use crate::serve::{bin, fake_model};

#[test]
fn the_conversations_bench_reports_every_turn_of_every_server() {
    let fake = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversations.yaml");
    let agents = crate::repo_root().join("examples/agents");
    std::fs::write(
        &file,
        format!(
            "agents: {}\nconversations:\n  - id: taxi\n    agent: taxi\n    turns: [\"I need a taxi\", \"12 Oak Street\"]\n",
            agents.display()
        ),
    )
    .unwrap();
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
