//! Tool parameters from JSON Schema: MCP `inputSchema`s and OpenAPI parameter and body
//! schemas. Local `$ref`s (`#/components/schemas/X`, `#/$defs/X`) are followed.

use guidepost_core::tool::{ParameterType, ToolParameter};
use serde_json::Value;

use crate::native::parameter;

const MAX_REF_DEPTH: usize = 16;

/// Follows local `$ref`s of `schema` against `root` (a bounded number of times, so cycles
/// cannot loop), and picks the non-null branch of `anyOf`/`oneOf` unions such as
/// `Optional[T]`.
pub(crate) fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_REF_DEPTH {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer)) {
                Some(target) => schema = target,
                None => return schema,
            }
            continue;
        }
        let union = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array);
        if let Some(branches) = union
            && let Some(branch) = branches.iter().find(|b| b.get("type").and_then(Value::as_str) != Some("null"))
            && schema.get("type").is_none()
        {
            schema = branch;
            continue;
        }
        return schema;
    }
    schema
}

/// The parameter type a schema describes. Unknown or object types become `string`.
pub(crate) fn parameter_type(root: &Value, schema: &Value) -> ParameterType {
    let schema = resolve(root, schema);
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string"),
        _ if schema.get("enum").is_some() => "string",
        _ => "string",
    };
    match kind {
        "integer" => ParameterType::Integer,
        "number" => ParameterType::Number,
        "boolean" => ParameterType::Boolean,
        "array" => ParameterType::Array,
        _ => match schema.get("format").and_then(Value::as_str) {
            Some("date") => ParameterType::Date,
            Some("date-time") => ParameterType::Datetime,
            Some("uuid") => ParameterType::Uuid,
            Some("duration") => ParameterType::Timedelta,
            _ => ParameterType::String,
        },
    }
}

/// One parameter from a property schema.
pub(crate) fn parameter_from_schema(root: &Value, name: &str, schema: &Value, required: bool) -> ToolParameter {
    let schema = resolve(root, schema);
    let kind = parameter_type(root, schema);
    let mut param = parameter(name, kind);
    param.required = required;
    param.description =
        schema.get("description").or_else(|| schema.get("title")).and_then(Value::as_str).map(str::to_string);
    param.default = schema.get("default").filter(|d| !d.is_null()).cloned();
    if param.default.is_some() {
        param.required = false;
    }
    let mut enum_source = schema;
    if kind == ParameterType::Array
        && let Some(items) = schema.get("items")
    {
        let items = resolve(root, items);
        param.items = Some(parameter_type(root, items));
        enum_source = items;
    }
    if let Some(values) = enum_source.get("enum").and_then(Value::as_array) {
        param.allowed = values.iter().filter(|v| !v.is_null()).cloned().collect();
    }
    if let Some(examples) = schema.get("examples").and_then(Value::as_array) {
        param.examples = examples.clone();
    } else if let Some(example) = schema.get("example") {
        param.examples = vec![example.clone()];
    }
    param
}

/// The parameters of an object schema (`properties` + `required`), in property order.
pub(crate) fn parameters_from_object(root: &Value, schema: &Value) -> Vec<ToolParameter> {
    let schema = resolve(root, schema);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, prop)| parameter_from_schema(root, name, prop, required.contains(&name.as_str())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_types_enums_refs_and_optionals() {
        let root = json!({
            "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
            "type": "object",
            "required": ["city", "when"],
            "properties": {
                "city": {"type": "string", "description": "City"},
                "when": {"type": "string", "format": "date-time"},
                "unit": {"$ref": "#/$defs/Unit", "default": "c"},
                "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "loop": {"$ref": "#/$defs/Loop"}
            }
        });
        let params = parameters_from_object(&root, &root);
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["city", "when", "unit", "days", "tags", "loop"]);
        assert!(params[0].required && params[0].description.as_deref() == Some("City"));
        assert_eq!(params[1].kind, ParameterType::Datetime);
        assert_eq!(params[2].allowed, vec![json!("c"), json!("f")]);
        assert_eq!(params[3].kind, ParameterType::Integer);
        assert!(!params[3].required);
        assert_eq!((params[4].kind, params[4].items), (ParameterType::Array, Some(ParameterType::String)));
        assert_eq!(params[4].allowed.len(), 2);
        assert_eq!(params[5].kind, ParameterType::String);
    }
}
