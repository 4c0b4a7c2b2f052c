//! The JSON Schema subset the document uses: a validator, a generator of values a schema
//! accepts, and mutations that break them.

use serde_json::{Map, Value, json};

use super::{Ids, Rng};

/// Follows a local `$ref`.
pub(super) fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..32 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => match doc.pointer(r.trim_start_matches('#')) {
                Some(target) => schema = target,
                None => return &Value::Bool(false),
            },
            None => break,
        }
    }
    schema
}

fn type_matches(kind: &str, value: &Value) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

/// Checks `value` against the JSON Schema subset the document uses (`$ref`, `type`, `enum`,
/// `const`, `anyOf`, `oneOf`, `allOf`, `nullable`, `properties`, `required`,
/// `additionalProperties`, `items`, `minimum`, `maximum`, `minLength`, `maxLength`,
/// `minItems`, `maxItems`); returns the problems, each with its JSON path.
pub(super) fn validate(doc: &Value, schema: &Value, value: &Value, at: &str, problems: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            problems.push(format!("{at}: no value is allowed here"));
        }
        return;
    };
    if value.is_null() && s.get("nullable") == Some(&Value::Bool(true)) {
        return;
    }
    if let Some(kind) = s.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(k) => vec![k.as_str()],
            Value::Array(ks) => ks.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !kinds.is_empty() && !kinds.iter().any(|k| type_matches(k, value)) {
            problems.push(format!("{at}: {value} is not of type {kind}"));
            return;
        }
    }
    if let Some(options) = s.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        problems.push(format!("{at}: {value} is not one of {options:?}"));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        problems.push(format!("{at}: {value} is not {c}"));
    }
    let branch_ok = |b: &Value| {
        let mut p = Vec::new();
        validate(doc, b, value, at, &mut p);
        p.is_empty()
    };
    if let Some(branches) = s.get("anyOf").and_then(Value::as_array)
        && !branches.iter().any(branch_ok)
    {
        problems.push(format!("{at}: {value} matches none of anyOf"));
    }
    if let Some(branches) = s.get("oneOf").and_then(Value::as_array) {
        let n = branches.iter().filter(|b| branch_ok(b)).count();
        if n != 1 {
            problems.push(format!("{at}: {value} matches {n} branches of oneOf, not one"));
        }
    }
    for b in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        validate(doc, b, value, at, problems);
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str)
        && doc.pointer(r.trim_start_matches('#')).is_none()
    {
        problems.push(format!("{at}: dangling {r}"));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            problems.push(format!("{at}: {n} < minimum {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            problems.push(format!("{at}: {n} > maximum {max}"));
        }
    }
    if let Some(text) = value.as_str() {
        let len = text.chars().count() as u64;
        if s.get("minLength").and_then(Value::as_u64).is_some_and(|m| len < m)
            || s.get("maxLength").and_then(Value::as_u64).is_some_and(|m| len > m)
        {
            problems.push(format!("{at}: length {len} outside the declared bounds"));
        }
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as u64;
        if s.get("minItems").and_then(Value::as_u64).is_some_and(|m| len < m)
            || s.get("maxItems").and_then(Value::as_u64).is_some_and(|m| len > m)
        {
            problems.push(format!("{at}: {len} items, outside the declared bounds"));
        }
        if let Some(item) = s.get("items") {
            for (i, v) in items.iter().enumerate() {
                validate(doc, item, v, &format!("{at}[{i}]"), problems);
            }
        }
    }
    if let Some(object) = value.as_object() {
        let properties = s.get("properties").and_then(Value::as_object);
        for name in s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                problems.push(format!("{at}: required `{name}` is missing"));
            }
        }
        for (k, v) in object {
            match properties.and_then(|p| p.get(k)) {
                Some(p) => validate(doc, p, v, &format!("{at}.{k}"), problems),
                None => {
                    if let Some(extra) = s.get("additionalProperties") {
                        validate(doc, extra, v, &format!("{at}.{k}"), problems);
                    }
                }
            }
        }
    }
}

/// A value the schema accepts (as far as the generator knows), built from its types,
/// enums, properties and items, with strings drawn from the fixtures' ids.
pub(super) fn generate(doc: &Value, schema: &Value, ids: &Ids, rng: &mut Rng, depth: usize) -> Value {
    let schema = resolve(doc, schema);
    let Some(s) = schema.as_object() else {
        return if depth > 3 { Value::Null } else { json!({"note": ids.string(rng)}) };
    };
    if let Some(options) = s.get("enum").and_then(Value::as_array) {
        return rng.pick(options).cloned().unwrap_or(Value::Null);
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(combinator).and_then(Value::as_array)
            && let Some(branch) = rng.pick(branches)
        {
            return generate(doc, branch, ids, rng, depth);
        }
    }
    if let Some(first) = s.get("allOf").and_then(Value::as_array).and_then(|a| a.first()) {
        return generate(doc, first, ids, rng, depth);
    }
    let kind = match s.get("type") {
        Some(Value::String(k)) => k.clone(),
        Some(Value::Array(ks)) => {
            let ks: Vec<&str> = ks.iter().filter_map(Value::as_str).collect();
            rng.pick(&ks).map_or("null".into(), |k| k.to_string())
        }
        _ if s.contains_key("properties") => "object".into(),
        _ => "string".into(),
    };
    match kind.as_str() {
        "null" => Value::Null,
        "boolean" => json!(rng.one_in(2)),
        "integer" | "number" => {
            let min = s.get("minimum").and_then(Value::as_i64).unwrap_or(-3);
            let max = s.get("maximum").and_then(Value::as_i64).unwrap_or(1000);
            let candidates = [min, min.saturating_add(1), 0, 1, 5, max];
            let n = rng.pick(&candidates).copied().unwrap_or(0).clamp(min, max);
            if kind == "number" && rng.one_in(3) { json!(n as f64 + 0.5) } else { json!(n) }
        }
        // Now and then a long text, for the size limits.
        "string" if rng.one_in(40) => {
            json!("long text ".repeat(rng.pick(&[40, 800, 12_000, 120_000]).copied().unwrap_or(1)))
        }
        "string" => json!(ids.string(rng)),
        "array" => {
            let n = if depth > 4 { 0 } else { rng.below(3) };
            let item = s.get("items").cloned().unwrap_or(Value::Bool(true));
            Value::Array((0..n).map(|_| generate(doc, &item, ids, rng, depth + 1)).collect())
        }
        _ => {
            let mut out = Map::new();
            let required: Vec<&str> =
                s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            for (name, p) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
                if required.contains(&name.as_str()) || (depth < 4 && rng.one_in(2)) {
                    out.insert(name.clone(), generate(doc, p, ids, rng, depth + 1));
                }
            }
            if let Some(extra) = s.get("additionalProperties").filter(|e| e.is_object() || **e == Value::Bool(true))
                && depth < 4
            {
                for _ in 0..rng.below(3) {
                    out.insert(format!("k{}", rng.below(100)), generate(doc, extra, ids, rng, depth + 1));
                }
            }
            Value::Object(out)
        }
    }
}

/// Values that break a schema: wrong types, nulls in lists, lists where objects belong.
fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => Value::Null,
        1 => json!([null, null]),
        2 => json!(12345),
        3 => json!(-1),
        4 => json!("x"),
        5 => json!({}),
        6 => json!(true),
        7 => json!([1, "a"]),
        _ => json!(1.5),
    }
}

/// Changes one randomly chosen place of `value`: replaces it, drops a key or adds one.
pub(super) fn mutate(value: &mut Value, rng: &mut Rng) {
    let count = count_nodes(value);
    let target = rng.below(count);
    let mut seen = 0;
    mutate_at(value, target, &mut seen, rng);
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(a) => a.iter().map(count_nodes).sum(),
        Value::Object(o) => o.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn mutate_at(value: &mut Value, target: usize, seen: &mut usize, rng: &mut Rng) -> bool {
    if *seen == target {
        match (value.as_object_mut(), rng.below(4)) {
            (Some(object), 0) if !object.is_empty() => {
                let key = object.keys().nth(rng.below(object.len())).cloned().unwrap_or_default();
                object.shift_remove(&key);
            }
            (Some(object), 1) => {
                object.insert("unexpected".into(), odd_value(rng));
            }
            _ => *value = odd_value(rng),
        }
        return true;
    }
    *seen += 1;
    match value {
        Value::Array(a) => a.iter_mut().any(|v| mutate_at(v, target, seen, rng)),
        Value::Object(o) => o.values_mut().any(|v| mutate_at(v, target, seen, rng)),
        _ => false,
    }
}
