use predicates::prelude::*;

use crate::guidepost;

#[test]
fn mermaid_of_an_example_journey() {
    guidepost()
        .args(["graph", "weather_lookup", "--agent", "examples/agents"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("stateDiagram-v2\n"))
        .stdout(predicate::str::contains("[*] --> s2: The customer said which city"))
        .stdout(predicate::str::contains("s5 --> [*]: The customer does not want another lookup"));
}

#[test]
fn dot_projection() {
    guidepost()
        .args(["graph", "taxi/book_taxi", "-a", "examples/agents", "--format", "dot", "--projection"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("digraph projection {"))
        .stdout(predicate::str::contains("journey_node:book_taxi.pickup:edge_001"));
}

#[test]
fn ambiguous_and_unknown_journeys_are_explained() {
    guidepost()
        .args(["graph", "nope", "-a", "examples/agents"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no journey `nope` found; journeys:"))
        .stderr(predicate::str::contains("weather/weather_lookup"));
}
