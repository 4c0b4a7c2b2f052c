//! Lists where the request type has an object. Deserialized with serde, a struct also takes
//! a JSON array of its fields in order, so `"tags": [null, null]` would pass for the object
//! `{"add": null, "remove": null}`; the API's document (and the reference) declare an object
//! there, and such a body is a 422. The body type's JSON Schema, the one the document
//! publishes, says where objects belong.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use serde_json::{Value, json};

/// The JSON Schema of `T` with its definitions, made once per type.
fn schema_of<T: JsonSchema + 'static>() -> Arc<Value> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<Value>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Default::default);
    if let Ok(known) = schemas.lock()
        && let Some(schema) = known.get(&TypeId::of::<T>())
    {
        return schema.clone();
    }
    let schema = Arc::new(schemars::SchemaGenerator::default().into_root_schema_for::<T>().to_value());
    if let Ok(mut known) = schemas.lock() {
        known.insert(TypeId::of::<T>(), schema.clone());
    }
    schema
}

/// Where in `body` (the location after `body`) a JSON array stands in a place where `T`
/// takes an object and never an array, if anywhere.
pub fn misplaced_list<T: JsonSchema + 'static>(body: &Value) -> Option<Vec<Value>> {
    let root = schema_of::<T>();
    let mut loc = Vec::new();
    walk(&root, &root, body, &mut loc, 0).then_some(loc)
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..16 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => match root.pointer(r.trim_start_matches('#')) {
                Some(target) => schema = target,
                None => return &Value::Bool(true),
            },
            None => break,
        }
    }
    schema
}

/// The schema and the branches of its `anyOf`/`oneOf`/`allOf`, resolved, flattened.
fn alternatives<'a>(root: &'a Value, schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
    let schema = resolve(root, schema);
    let mut branched = false;
    for key in ["anyOf", "oneOf", "allOf"] {
        for branch in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            branched = true;
            if depth < 16 {
                alternatives(root, branch, out, depth + 1);
            }
        }
    }
    if !branched || schema.get("type").is_some() || schema.get("properties").is_some() {
        out.push(schema);
    }
}

/// Whether `schema` (one alternative) takes values of JSON type `kind`.
fn takes(schema: &Value, kind: &str) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(s) => match s.get("type") {
            Some(Value::String(t)) => t == kind,
            Some(Value::Array(ts)) => ts.iter().any(|t| t == kind),
            _ => !s.contains_key("properties") || kind == "object",
        },
        _ => true,
    }
}

fn walk(root: &Value, schema: &Value, value: &Value, loc: &mut Vec<Value>, depth: usize) -> bool {
    if depth > 64 {
        return false;
    }
    let mut options = Vec::new();
    alternatives(root, schema, &mut options, 0);
    match value {
        Value::Array(items) => {
            let lists: Vec<&Value> = options.iter().copied().filter(|s| takes(s, "array")).collect();
            if lists.is_empty() && options.iter().any(|s| takes(s, "object")) {
                return true;
            }
            for (i, item) in items.iter().enumerate() {
                loc.push(json!(i));
                for list in &lists {
                    let item_schema = list.get("items").unwrap_or(&Value::Bool(true));
                    if walk(root, item_schema, item, loc, depth + 1) {
                        return true;
                    }
                }
                loc.pop();
            }
            false
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                loc.push(json!(name));
                for object in options.iter().filter(|s| takes(s, "object")) {
                    let field_schema = object
                        .get("properties")
                        .and_then(|p| p.get(name))
                        .or_else(|| object.get("additionalProperties"))
                        .unwrap_or(&Value::Bool(true));
                    if walk(root, field_schema, field, loc, depth + 1) {
                        return true;
                    }
                }
                loc.pop();
            }
            false
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde_json::json;

    use super::misplaced_list;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Change {
        add: Option<Vec<String>>,
        remove: Option<Vec<String>>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Update {
        name: Option<String>,
        tags: Option<Change>,
        metadata: Option<std::collections::BTreeMap<String, serde_json::Value>>,
        changes: Option<Vec<Change>>,
    }

    #[test]
    fn lists_where_objects_belong_are_found_with_their_place() {
        assert_eq!(misplaced_list::<Update>(&json!({"tags": [null, null]})), Some(vec![json!("tags")]));
        assert_eq!(misplaced_list::<Update>(&json!([null, null, null, null])), Some(vec![]));
        assert_eq!(
            misplaced_list::<Update>(&json!({"changes": [{"add": []}, [null]]})),
            Some(vec![json!("changes"), json!(1)])
        );
    }

    #[test]
    fn lists_where_lists_or_anything_belong_pass() {
        assert_eq!(misplaced_list::<Update>(&json!({"tags": {"add": ["a"], "remove": null}})), None);
        assert_eq!(misplaced_list::<Update>(&json!({"metadata": {"k": [1, 2]}, "changes": []})), None);
        assert_eq!(misplaced_list::<Update>(&json!({"name": "x", "unknown": [1]})), None);
    }
}
