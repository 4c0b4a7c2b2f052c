use predicates::prelude::*;

use crate::guidepost;

#[test]
fn a_file_draws_its_journey() {
    guidepost()
        .args(["graph", "examples/agents/weather.yaml"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("stateDiagram-v2\n"))
        .stdout(predicate::str::contains("[*] --> s2: 用户说了要查哪个城市"))
        .stdout(predicate::str::contains("s5 --> [*]: 用户不想再查了"));
}

#[test]
fn a_folder_draws_every_journey_as_markdown() {
    let output = guidepost().args(["graph", "examples/agents"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("(weather/weather_lookup)\n\n```mermaid\nstateDiagram-v2\n"), "{text}");
    assert!(text.contains("(taxi/book_taxi)"), "{text}");
    assert_eq!(text.matches("```mermaid").count(), text.matches("stateDiagram-v2").count());
}

#[test]
fn a_journey_by_option_or_selector() {
    guidepost()
        .args(["graph", "examples/agents", "--journey", "weather_lookup"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("stateDiagram-v2\n"));
    guidepost()
        .args(["graph", "taxi/book_taxi", "examples/agents", "--format", "dot", "--projection"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("digraph projection {"))
        .stdout(predicate::str::contains("journey_node:book_taxi.pickup:edge_001"));
}

#[test]
fn the_default_scans_the_current_folder_without_test_corpora() {
    // From the repository root, with no path: the example agents are found and the broken
    // agents of the test corpus are not looked at.
    guidepost()
        .args(["graph", "--journey", "book_taxi"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("stateDiagram-v2\n"))
        .stderr(predicate::str::is_empty());
}

#[test]
fn unknown_journeys_and_broken_agents_are_explained() {
    guidepost()
        .args(["graph", "nope", "examples/agents"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no journey `nope` in examples/agents; journeys:"))
        .stderr(predicate::str::contains("weather/weather_lookup"));
    // An agent that does not load: its problems, as `check` shows them.
    guidepost()
        .args(["graph", "crates/guidepost-core/tests/corpus/broken/journey_graph.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("error["))
        .stderr(predicate::str::contains("journey_graph.yaml:"))
        .stderr(predicate::str::contains("does not load"));
}
