//! A small JSON Schema validator for the subset Guidepost emits: `type` (including arrays of
//! types and `integer`), `nullable`, `properties`, `required`, `additionalProperties`,
//! `items`, `enum`, `const`, `anyOf`, `oneOf`, `allOf`, `$ref` into `$defs`/`definitions`,
//! and the bounds `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`.
//! Other keywords are ignored (accepted), which errs on the side of keeping an answer.

use serde_json::{Map, Value};

/// How deep `$ref` chains and nesting may go before validation gives up (guards against
/// self-referencing schemas).
const MAX_DEPTH: usize = 64;

/// Checks `instance` against `schema`. On failure, returns one message per violation, each
/// starting with the JSON path of the offending value (`$.checks[0].applies: ...`).
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {"applies": {"type": "boolean"}},
///                     "required": ["applies"], "additionalProperties": false});
/// assert!(guidepost_llm::validate(&schema, &json!({"applies": true})).is_ok());
/// let errors = guidepost_llm::validate(&schema, &json!({"applies": "yes"})).unwrap_err();
/// assert_eq!(errors, vec!["$.applies: expected boolean, got string \"yes\"".to_string()]);
/// ```
pub fn validate(schema: &Value, instance: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let validator = Validator { root: schema };
    validator.check(schema, instance, "$", 0, &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

struct Validator<'a> {
    root: &'a Value,
}

fn describe(value: &Value) -> String {
    format!("{} {}", type_name(value), crate::excerpt(&value.to_string(), 60))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
            _ => false,
        },
        _ => true,
    }
}

impl Validator<'_> {
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn check(&self, schema: &Value, value: &Value, path: &str, depth: usize, errors: &mut Vec<String>) {
        if depth > MAX_DEPTH {
            errors.push(format!("{path}: schema nesting deeper than {MAX_DEPTH}"));
            return;
        }
        let obj = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(format!("{path}: no value is allowed here"));
                return;
            }
            Value::Object(obj) => obj,
            _ => return,
        };
        if let Some(Value::String(reference)) = obj.get("$ref") {
            match self.resolve(reference) {
                Some(target) => self.check(target, value, path, depth + 1, errors),
                None => errors.push(format!("{path}: unresolvable $ref `{reference}`")),
            }
        }
        let nullable = obj.get("nullable") == Some(&Value::Bool(true));
        if nullable && value.is_null() {
            return;
        }
        if let Some(types) = obj.get("type") {
            let allowed: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !allowed.is_empty() && !allowed.iter().any(|t| has_type(value, t)) {
                errors.push(format!("{path}: expected {}, got {}", allowed.join(" or "), describe(value)));
                return;
            }
        }
        if let Some(Value::Array(options)) = obj.get("enum")
            && !options.contains(value)
        {
            let options: Vec<String> = options.iter().map(Value::to_string).collect();
            errors.push(format!("{path}: {} is not one of [{}]", describe(value), options.join(", ")));
        }
        if let Some(expected) = obj.get("const")
            && expected != value
        {
            errors.push(format!("{path}: expected {expected}, got {}", describe(value)));
        }
        self.check_combinators(obj, value, path, depth, errors);
        match value {
            Value::Object(map) => self.check_object(obj, map, path, depth, errors),
            Value::Array(items) => self.check_array(obj, items, path, depth, errors),
            Value::String(text) => check_string_length(obj, text.chars().count(), path, errors),
            Value::Number(n) => {
                if let Some(n) = n.as_f64() {
                    if let Some(min) = obj.get("minimum").and_then(Value::as_f64)
                        && n < min
                    {
                        errors.push(format!("{path}: {n} is less than the minimum {min}"));
                    }
                    if let Some(max) = obj.get("maximum").and_then(Value::as_f64)
                        && n > max
                    {
                        errors.push(format!("{path}: {n} is greater than the maximum {max}"));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_combinators(
        &self,
        obj: &Map<String, Value>,
        value: &Value,
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        if let Some(Value::Array(all)) = obj.get("allOf") {
            for sub in all {
                self.check(sub, value, path, depth + 1, errors);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            let Some(Value::Array(options)) = obj.get(keyword) else {
                continue;
            };
            let mut failures = Vec::new();
            let mut passed = 0;
            for sub in options {
                let mut sub_errors = Vec::new();
                self.check(sub, value, path, depth + 1, &mut sub_errors);
                if sub_errors.is_empty() {
                    passed += 1;
                } else {
                    failures.push(sub_errors.join("; "));
                }
            }
            if passed == 0 {
                errors.push(format!("{path}: matches none of the {keyword} alternatives ({})", failures.join(" | ")));
            } else if keyword == "oneOf" && passed > 1 {
                errors.push(format!("{path}: matches {passed} of the oneOf alternatives, expected exactly one"));
            }
        }
    }

    fn check_object(
        &self,
        obj: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let properties = obj.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = obj.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(name) {
                    errors.push(format!("{path}: missing required property `{name}`"));
                }
            }
        }
        for (key, item) in map {
            let item_path = format!("{path}.{key}");
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => self.check(sub, item, &item_path, depth + 1, errors),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> =
                            properties.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        errors.push(format!("{path}: unexpected property `{key}` (allowed: {})", known.join(", ")));
                    }
                    Some(sub @ Value::Object(_)) => {
                        self.check(sub, item, &item_path, depth + 1, errors);
                    }
                    _ => {}
                },
            }
        }
    }

    fn check_array(
        &self,
        obj: &Map<String, Value>,
        items: &[Value],
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let key_min = obj.get("minItems").and_then(Value::as_u64);
        let key_max = obj.get("maxItems").and_then(Value::as_u64);
        let len = items.len() as u64;
        if let Some(min) = key_min
            && len < min
        {
            errors.push(format!("{path}: {len} items, expected at least {min}"));
        }
        if let Some(max) = key_max
            && len > max
        {
            errors.push(format!("{path}: {len} items, expected at most {max}"));
        }
        if let Some(item_schema) = obj.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.check(item_schema, item, &format!("{path}[{i}]"), depth + 1, errors);
            }
        }
    }
}

/// `minLength` / `maxLength` of a string of `len` characters.
fn check_string_length(obj: &Map<String, Value>, len: usize, path: &str, errors: &mut Vec<String>) {
    let unit = "characters";
    let len = len as u64;
    if let Some(min) = obj.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        errors.push(format!("{path}: {len} {unit}, expected at least {min}"));
    }
    if let Some(max) = obj.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        errors.push(format!("{path}: {len} {unit}, expected at most {max}"));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn errors(schema: &Value, value: &Value) -> Vec<String> {
        validate(schema, value).err().unwrap_or_default()
    }

    #[test]
    fn objects_required_and_additional() {
        let schema = json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
            "required": ["id", "n"],
            "additionalProperties": false
        });
        assert!(validate(&schema, &json!({"id": "g1", "n": 3})).is_ok());
        assert!(validate(&schema, &json!({"id": "g1", "n": 3.0})).is_ok());
        let errs = errors(&schema, &json!({"id": "g1", "extra": 1}));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("missing required property `n`"));
        assert!(errs[1].contains("unexpected property `extra`"));
        assert!(errors(&schema, &json!({"id": "g", "n": -1}))[0].contains("minimum"));
        assert!(errors(&schema, &json!({"id": "g", "n": 1.5}))[0].contains("expected integer"));
    }

    #[test]
    fn refs_arrays_enums_and_nullables() {
        let schema = json!({
            "type": "object",
            "properties": {
                "checks": {"type": "array", "items": {"$ref": "#/$defs/Check"}, "maxItems": 2},
                "note": {"type": ["string", "null"]},
                "legacy": {"type": "string", "nullable": true}
            },
            "$defs": {
                "Check": {
                    "type": "object",
                    "properties": {
                        "verdict": {"enum": ["yes", "no"]},
                        "kind": {"const": "check"}
                    },
                    "required": ["verdict"]
                }
            }
        });
        let good = json!({"checks": [{"verdict": "yes", "kind": "check"}], "note": null, "legacy": null});
        assert!(validate(&schema, &good).is_ok());
        let bad = json!({"checks": [{"verdict": "maybe"}, {"kind": "x", "verdict": "no"}, {}]});
        let errs = errors(&schema, &bad);
        assert!(errs.iter().any(|e| e.starts_with("$.checks: 3 items")), "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("$.checks[0].verdict:") && e.contains("not one of")));
        assert!(errs.iter().any(|e| e.starts_with("$.checks[1].kind: expected \"check\"")));
        assert!(errs.iter().any(|e| e.starts_with("$.checks[2]: missing required property `verdict`")));
    }

    #[test]
    fn any_of_one_of_and_bad_refs() {
        let schema = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert!(validate(&schema, &json!(3)).is_ok());
        assert!(errors(&schema, &json!(true))[0].contains("none of the anyOf"));
        let one = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
        assert!(errors(&one, &json!(3))[0].contains("exactly one"));
        assert!(validate(&one, &json!(3.5)).is_ok());
        let dangling = json!({"$ref": "#/$defs/Nope"});
        assert!(errors(&dangling, &json!(1))[0].contains("unresolvable"));
        let looping = json!({"$ref": "#"});
        assert!(errors(&looping, &json!(1))[0].contains("deeper than"));
        assert!(errors(&json!(false), &json!(1))[0].contains("no value"));
        assert!(validate(&json!(true), &json!(1)).is_ok());
    }
}
