use predicates::prelude::*;

use crate::guidepost;

#[test]
fn every_command_has_help() {
    guidepost()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("check"))
        .stdout(predicate::str::contains("graph"))
        .stdout(predicate::str::contains("schema"));
    for (command, expect) in [
        ("check", "report every problem with its file:line:column"),
        ("graph", "--projection"),
        ("schema", "JSON Schema"),
    ] {
        guidepost().args([command, "--help"]).assert().success().stdout(predicate::str::contains(expect));
    }
}
