//! JSON Schemas for structured answers: derive them from Rust types, make them acceptable to
//! OpenAI's strict mode, and ask a model for a typed value with [`generate`].

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::LlmError;
use crate::ports::ChatModel;
use crate::request::{ChatRequest, Output, OutputFormat};
use crate::usage::Usage;

/// `format` values OpenAI's strict mode accepts; others (schemars' `uint32`, `double` ...) are
/// dropped by [`make_strict`].
const STRICT_FORMATS: [&str; 9] =
    ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Rewrites `schema` in place so that OpenAI's strict structured output accepts it, without
/// changing which answers are valid except that optional properties become required-but-
/// nullable:
///
/// - every object with `properties` gets `additionalProperties: false` and lists all its
///   properties in `required`; a property that was optional now also accepts `null`;
/// - `$schema` and unsupported `format` values are removed.
///
/// ```
/// use serde_json::json;
/// let mut schema = json!({"type": "object",
///     "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
///     "required": ["a"]});
/// guidepost_llm::make_strict(&mut schema);
/// assert_eq!(schema, json!({"type": "object",
///     "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
///     "required": ["a", "b"], "additionalProperties": false}));
/// ```
pub fn make_strict(schema: &mut Value) {
    if let Value::Object(obj) = schema {
        obj.remove("$schema");
    }
    strictify(schema);
}

fn strictify(schema: &mut Value) {
    let Value::Object(obj) = schema else {
        return;
    };
    if let Some(Value::String(format)) = obj.get("format")
        && !STRICT_FORMATS.contains(&format.as_str())
    {
        obj.remove("format");
    }
    for key in ["$defs", "definitions", "properties"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            children.values_mut().for_each(strictify);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = obj.get_mut(key) {
            children.iter_mut().for_each(strictify);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child @ Value::Object(_)) = obj.get_mut(key) {
            strictify(child);
        }
    }
    let Some(Value::Object(properties)) = obj.get_mut("properties") else {
        return;
    };
    let names: Vec<String> = properties.keys().cloned().collect();
    let required: Vec<String> = match obj.get("required") {
        Some(Value::Array(list)) => list.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = obj.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                make_nullable(property);
            }
        }
    }
    obj.insert("required".into(), Value::Array(names.into_iter().map(Value::String).collect()));
    obj.insert("additionalProperties".into(), Value::Bool(false));
}

fn make_nullable(property: &mut Value) {
    let accepts_null = |obj: &Map<String, Value>| match obj.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    match property {
        Value::Object(obj) if accepts_null(obj) => {}
        Value::Object(obj) if obj.get("type").is_some_and(Value::is_string) => {
            if let Some(ty) = obj.remove("type") {
                obj.insert("type".into(), Value::Array(vec![ty, Value::from("null")]));
            }
        }
        Value::Object(obj) if obj.get("type").is_some_and(Value::is_array) => {
            if let Some(Value::Array(types)) = obj.get_mut("type") {
                types.push(Value::from("null"));
            }
        }
        other => {
            let original = std::mem::take(other);
            *other = serde_json::json!({"anyOf": [original, {"type": "null"}]});
        }
    }
}

/// Whether OpenAI's strict mode accepts `schema` as it is: every object schema lists all its
/// properties in `required` and sets `additionalProperties: false`.
///
/// ```
/// use serde_json::json;
/// let mut schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
/// assert!(!guidepost_llm::is_strict_compatible(&schema));
/// guidepost_llm::make_strict(&mut schema);
/// assert!(guidepost_llm::is_strict_compatible(&schema));
/// ```
pub fn is_strict_compatible(schema: &Value) -> bool {
    let Value::Object(obj) = schema else {
        return true;
    };
    if let Some(Value::Object(properties)) = obj.get("properties") {
        let required: Vec<&str> = match obj.get("required") {
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if obj.get("additionalProperties") != Some(&Value::Bool(false))
            || properties.keys().any(|k| !required.contains(&k.as_str()))
        {
            return false;
        }
    }
    let children = ["$defs", "definitions", "properties"]
        .iter()
        .filter_map(|k| obj.get(*k).and_then(Value::as_object))
        .flat_map(|m| m.values())
        .chain(["anyOf", "oneOf", "allOf"].iter().filter_map(|k| obj.get(*k).and_then(Value::as_array)).flatten())
        .chain(obj.get("items"));
    children.into_iter().all(is_strict_compatible)
}

/// The JSON Schema of `T`, made strict with [`make_strict`].
pub fn strict_schema_for<T: JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let mut value = serde_json::to_value(&schema).unwrap_or(Value::Bool(true));
    make_strict(&mut value);
    value
}

/// A schema name providers accept (`[A-Za-z0-9_-]`, at most 64 characters) derived from `T`.
pub fn schema_name_for<T: JsonSchema>() -> String {
    let name: String = T::schema_name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if name.is_empty() { "answer".to_string() } else { name }
}

/// Asks `model` for a value of type `T`: sets the request's output to `T`'s strict schema,
/// then deserializes the answer.
///
/// A value that does not deserialize is a [`LlmError::SchemaViolation`]. Validation and
/// re-asks happen in the model stack (see the re-ask middleware).
pub async fn generate<T: DeserializeOwned + JsonSchema>(
    model: &dyn ChatModel,
    req: ChatRequest,
) -> Result<(T, Usage), LlmError> {
    generate_with_schema(model, req, schema_name_for::<T>(), strict_schema_for::<T>()).await
}

/// Like [`generate`], with a schema built for this one call (for example an object whose
/// keys name the items the model must judge, so constrained decoding makes it judge every
/// one); `T` must deserialize from answers to `schema`.
pub async fn generate_with_schema<T: DeserializeOwned>(
    model: &dyn ChatModel,
    req: ChatRequest,
    name: String,
    schema: Value,
) -> Result<(T, Usage), LlmError> {
    generate_weighed(model, req, name, schema).await.map(|(answer, usage, _)| (answer, usage))
}

/// [`generate_with_schema`], also returning where the model chose among tokens and how
/// likely each was ([`ChatResponse::decisions`](crate::ChatResponse::decisions); empty
/// for providers that do not report it).
pub async fn generate_weighed<T: DeserializeOwned>(
    model: &dyn ChatModel,
    mut req: ChatRequest,
    name: String,
    schema: Value,
) -> Result<(T, Usage, Vec<crate::TokenDecision>), LlmError> {
    req.output = OutputFormat::Json { name, schema, strict: true };
    let response = model.complete(req).await?;
    let value = match response.output {
        Output::Json(value) => value,
        Output::Text(text) => serde_json::from_str(&text).map_err(|e| LlmError::SchemaViolation {
            errors: vec![format!("answer is not JSON: {e}")],
            answer: text.clone(),
        })?,
    };
    let answer = value.to_string();
    let typed =
        serde_json::from_value(value).map_err(|e| LlmError::SchemaViolation { errors: vec![e.to_string()], answer })?;
    Ok((typed, response.usage, response.decisions))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::providers::scripted::ScriptedModel;
    use crate::request::TaskKind;
    use crate::validate::validate;

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    struct Check {
        rationale: String,
        applies: bool,
        score: Option<u32>,
        kind: Kind,
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Condition,
        Action,
    }

    #[test]
    fn derived_schema_is_strict_and_ordered() {
        let schema = strict_schema_for::<Check>();
        assert!(schema.get("$schema").is_none());
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["required"], json!(["rationale", "applies", "score", "kind"]));
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["rationale", "applies", "score", "kind"]);
        assert!(schema["properties"]["score"].get("format").is_none());
        let good = json!({"rationale": "r", "applies": true, "score": null, "kind": "action"});
        assert_eq!(validate(&schema, &good), Ok(()));
        assert_eq!(schema_name_for::<Check>(), "Check");
    }

    #[test]
    fn optional_refs_become_any_of_null() {
        let mut schema = json!({
            "type": "object",
            "properties": {"inner": {"$ref": "#/$defs/X"}},
            "$defs": {"X": {"type": "object", "properties": {"a": {"type": "string"}}}}
        });
        make_strict(&mut schema);
        assert_eq!(schema["properties"]["inner"], json!({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}));
        assert_eq!(schema["$defs"]["X"]["required"], json!(["a"]));
        assert_eq!(schema["$defs"]["X"]["properties"]["a"]["type"], json!(["string", "null"]));
    }

    #[tokio::test]
    async fn generate_sets_the_schema_and_deserializes() {
        let model = ScriptedModel::new().on(TaskKind::Matching, |req| {
            assert_eq!(req.schema_name(), Some("Check"));
            Ok(json!({"rationale": "r", "applies": true, "score": 3, "kind": "condition"}))
        });
        let req = ChatRequest::new(TaskKind::Matching).user("x");
        let (check, usage) = generate::<Check>(&model, req).await.unwrap();
        assert_eq!(check.score, Some(3));
        assert_eq!(check.kind, Kind::Condition);
        assert_eq!(usage.calls, 1);

        let wrong = ScriptedModel::new().on(TaskKind::Matching, |_| Ok(json!({"applies": "yes"})));
        let err = generate::<Check>(&wrong, ChatRequest::new(TaskKind::Matching).user("x")).await.unwrap_err();
        assert!(matches!(err, LlmError::SchemaViolation { .. }), "{err}");
    }
}
