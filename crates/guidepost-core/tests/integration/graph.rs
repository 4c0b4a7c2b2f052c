//! Journey diagrams: valid Mermaid (checked line by line against the syntax we emit) and
//! stable output (snapshots).

use guidepost_core::graph::{Format, journey_diagram, projection_diagram};
use guidepost_core::projection::project;

use crate::common::{EXAMPLES, example};

/// Checks a `stateDiagram-v2` produced by [`journey_diagram`]: every line has one of the
/// forms Mermaid accepts, labels are escaped, and every state used is declared.
fn assert_valid_state_diagram(text: &str) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("stateDiagram-v2"));
    let mut declared = std::collections::HashSet::new();
    for line in lines {
        let body = line.strip_prefix("    ").unwrap_or_else(|| panic!("unindented line {line:?}"));
        if body.starts_with("%% ") {
            continue;
        }
        if let Some(rest) = body.strip_prefix("state \"") {
            let (label, name) = rest.split_once("\" as ").unwrap_or_else(|| panic!("bad state line {line:?}"));
            assert!(!label.contains('"') && !label.contains(':'), "unescaped label {label:?}");
            assert!(name.starts_with('s') && name[1..].chars().all(|c| c.is_ascii_digit()), "bad id {name}");
            declared.insert(name.to_string());
            continue;
        }
        let (edge, label) = match body.split_once(": ") {
            Some((e, l)) => (e, Some(l)),
            None => (body, None),
        };
        let (from, to) = edge.split_once(" --> ").unwrap_or_else(|| panic!("bad line {line:?}"));
        for end in [from, to] {
            assert!(end == "[*]" || declared.contains(end), "undeclared state {end} in {line:?}");
        }
        if let Some(label) = label {
            assert!(!label.is_empty() && !label.contains('"'), "bad label {label:?}");
        }
    }
}

fn assert_valid_flowchart(text: &str) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("flowchart TD"));
    let mut declared = std::collections::HashSet::new();
    for line in lines {
        let body = line.strip_prefix("    ").unwrap();
        if let Some((id, rest)) = body.split_once("[\"") {
            assert!(rest.ends_with("\"]") && !rest[..rest.len() - 2].contains('"'), "{line:?}");
            declared.insert(id.to_string());
            continue;
        }
        let parts: Vec<&str> = body.split(' ').collect();
        let (from, to) = (parts[0], parts[parts.len() - 1]);
        assert!(declared.contains(from) && declared.contains(to), "{line:?}");
        assert!(parts[1] == "-->" || parts[1].starts_with("-->|\""), "{line:?}");
    }
}

#[test]
fn example_journeys_render_valid_mermaid() {
    for name in EXAMPLES {
        let def = example(name);
        for journey in &def.journeys {
            let text = journey_diagram(journey, Format::Mermaid);
            assert_valid_state_diagram(&text);
            assert_valid_flowchart(&projection_diagram(&project(&def, &journey.id).unwrap(), Format::Mermaid));
            if name != "otto" {
                insta::assert_snapshot!(format!("mermaid_{name}_{}", journey.id), text);
            }
        }
    }
}

#[test]
fn dot_output_is_stable() {
    let def = example("taxi");
    let text = journey_diagram(def.journey("book_taxi").unwrap(), Format::Dot);
    assert!(text.starts_with("digraph \"book_taxi\" {"));
    insta::assert_snapshot!("dot_taxi_book_taxi", text);
}

#[test]
fn weather_projection_renders() {
    let def = example("weather");
    insta::assert_snapshot!(
        "mermaid_weather_projection",
        projection_diagram(&project(&def, "weather_lookup").unwrap(), Format::Mermaid)
    );
}
