//! A JSON Schema (2020-12) checker for the keywords the Tally schemas in `tests/tally-schemas`
//! use: `$ref` into `$defs`, `type`, `enum`, `const`, `required`, `properties`,
//! `additionalProperties`, `items`, `prefixItems`, `minItems`, `maxItems`, `anyOf`, `oneOf`,
//! `allOf`, `if`/`then`/`else`, `pattern`, `minimum`, `maximum`. Any other keyword in a schema
//! fails the check, so a schema that grows a keyword cannot pass unchecked.

use std::path::Path;

use serde_json::{Map, Value};

const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "enum",
    "const",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
    "if",
    "then",
    "else",
    "pattern",
    "minimum",
    "maximum",
];

/// A schema file of `tests/tally-schemas`.
pub fn load(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tally-schemas").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The violations of `value` against `schema` (empty when valid), each with its JSON path.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, value, "$", &mut errors);
    errors
}

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => false,
    }
}

fn check(root: &Value, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let schema = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return errors.push(format!("{path}: nothing is allowed here")),
        Value::Object(s) => s,
        _ => return errors.push(format!("{path}: the schema is not an object")),
    };
    for key in schema.keys().filter(|k| !k.starts_with("x-") && !KNOWN.contains(&k.as_str())) {
        errors.push(format!("{path}: the checker does not know the keyword `{key}`"));
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        match reference.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(target) => check(root, target, value, path, errors),
            None => errors.push(format!("{path}: unresolved $ref {reference}")),
        }
    }
    match schema.get("type") {
        Some(Value::String(ty)) if !type_matches(ty, value) => {
            return errors.push(format!("{path}: expected {ty}, found {value}"));
        }
        Some(Value::Array(types)) if !types.iter().filter_map(Value::as_str).any(|t| type_matches(t, value)) => {
            return errors.push(format!("{path}: expected one of {types:?}, found {value}"));
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {}", Value::Array(options.clone())));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        errors.push(format!("{path}: expected {constant}, found {value}"));
    }
    combinators(root, schema, value, path, errors);
    match value {
        Value::Object(object) => check_object(root, schema, object, path, errors),
        Value::Array(items) => check_array(root, schema, items, path, errors),
        Value::String(text) => {
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                let matched = regex::Regex::new(pattern).map(|r| r.is_match(text));
                if matched.as_ref().map_or(true, |m| !m) {
                    errors.push(format!("{path}: {text:?} does not match {pattern} ({matched:?})"));
                }
            }
        }
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or_default();
            if schema.get("minimum").and_then(Value::as_f64).is_some_and(|min| n < min) {
                errors.push(format!("{path}: {n} is below the minimum"));
            }
            if schema.get("maximum").and_then(Value::as_f64).is_some_and(|max| n > max) {
                errors.push(format!("{path}: {n} is above the maximum"));
            }
        }
        _ => {}
    }
}

fn passes(root: &Value, schema: &Value, value: &Value, path: &str) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(root, schema, value, path, &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn combinators(root: &Value, schema: &Map<String, Value>, value: &Value, path: &str, errors: &mut Vec<String>) {
    for sub in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        check(root, sub, value, path, errors);
    }
    for keyword in ["anyOf", "oneOf"] {
        let Some(options) = schema.get(keyword).and_then(Value::as_array) else { continue };
        let results: Vec<_> = options.iter().map(|o| passes(root, o, value, path)).collect();
        let passed = results.iter().filter(|r| r.is_ok()).count();
        if passed == 0 {
            let why: Vec<String> = results.into_iter().filter_map(Result::err).map(|e| e.join("; ")).collect();
            errors.push(format!("{path}: matches no {keyword} alternative: {}", why.join(" | ")));
        } else if keyword == "oneOf" && passed > 1 {
            errors.push(format!("{path}: matches {passed} oneOf alternatives"));
        }
    }
    if let Some(condition) = schema.get("if") {
        let branch = if passes(root, condition, value, path).is_ok() { "then" } else { "else" };
        if let Some(sub) = schema.get(branch) {
            check(root, sub, value, path, errors);
        }
    }
}

fn check_object(
    root: &Value,
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<String>,
) {
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            errors.push(format!("{path}: `{name}` is required"));
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, item) in object {
        let item_path = format!("{path}.{key}");
        match (properties.and_then(|p| p.get(key)), schema.get("additionalProperties")) {
            (Some(sub), _) => check(root, sub, item, &item_path, errors),
            (None, Some(extra)) => check(root, extra, item, &item_path, errors),
            (None, None) => {}
        }
    }
}

fn check_array(root: &Value, schema: &Map<String, Value>, items: &[Value], path: &str, errors: &mut Vec<String>) {
    let prefix = schema.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        match (prefix.get(i), schema.get("items")) {
            (Some(sub), _) | (None, Some(sub)) => check(root, sub, item, &item_path, errors),
            (None, None) => {}
        }
    }
    let len = items.len() as f64;
    if schema.get("minItems").and_then(Value::as_f64).is_some_and(|min| len < min) {
        errors.push(format!("{path}: fewer items than minItems"));
    }
    if schema.get("maxItems").and_then(Value::as_f64).is_some_and(|max| len > max) {
        errors.push(format!("{path}: more items than maxItems"));
    }
}

#[test]
fn the_checker_rejects_what_tally_rejects() {
    let traces = load("step-traces.schema.json");
    let good = serde_json::json!([{"turnIndex": 0, "userMessage": {"role": "user", "content": "Hi"},
        "agentMessages": [{"role": "assistant", "content": "Hello"}], "timestamp": "2026-01-19T17:22:30.506Z",
        "stepId": null, "selection": {"method": "none"},
        "end": {"isFinal": true, "reason": "max-turns", "completed": false, "summary": "done"}}]);
    assert_eq!(violations(&traces, &good), Vec::<String>::new());
    for (pointer, bad) in [
        ("/0/end/reason", serde_json::json!("customer-ended")),
        ("/0/selection/method", serde_json::json!("random")),
        ("/0/end/summary", Value::Null),
        ("/0/timestamp", serde_json::json!("yesterday")),
    ] {
        let mut broken = good.clone();
        *broken.pointer_mut(pointer).unwrap() = bad;
        assert!(!violations(&traces, &broken).is_empty(), "{pointer} should be rejected");
    }
    let mut no_step = good.clone();
    no_step[0].as_object_mut().unwrap().remove("stepId");
    assert!(!violations(&traces, &no_step).is_empty(), "a missing stepId is rejected");
}
