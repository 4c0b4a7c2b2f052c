//! Request extractors that fail the way the official clients expect: a body or query
//! parameter that does not fit is a 422 naming the field, never a 400 or a 500.

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, FieldError};

/// A JSON body of type `T`.
#[derive(Debug, Clone)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + schemars::JsonSchema + 'static> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge(crate::MAX_BODY_BYTES)
            } else {
                ApiError::invalid(FieldError::new(vec![json!("body")], "body_unreadable", rejection.body_text()))
            }
        })?;
        parse_body(&bytes).map(Body)
    }
}

/// A body taken as it is (a definition file, say), with the same rejections as [`Body`].
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state).await.map(RawBody).map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge(crate::MAX_BODY_BYTES)
            } else {
                ApiError::invalid(FieldError::new(vec![json!("body")], "body_unreadable", rejection.body_text()))
            }
        })
    }
}

impl RawBody {
    /// The body as UTF-8 text, or a 422 naming the first byte that is not.
    pub fn text(self) -> ApiResult<String> {
        String::from_utf8(self.0.to_vec()).map_err(|e| {
            ApiError::invalid(FieldError::new(
                vec![json!("body")],
                "unicode_error",
                format!("the body is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
            ))
        })
    }
}

/// How deeply a request body may nest arrays and objects. Stored documents wrap a body in
/// two more levels, and every one must stay readable.
pub const MAX_JSON_DEPTH: usize = 32;

/// Parses a JSON body, locating every problem in FastAPI's terms.
pub fn parse_body<T: DeserializeOwned + schemars::JsonSchema + 'static>(bytes: &[u8]) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(FieldError::new(vec![json!("body")], "missing", "Field required")));
    }
    if guidepost_core::definition::text::first_too_deep(bytes, MAX_JSON_DEPTH).is_some() {
        return Err(ApiError::invalid(FieldError::new(
            vec![json!("body")],
            "json_too_deep",
            format!("the body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"),
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let value = match result {
        Ok(v) => v,
        Err(e) => return Err(ApiError::invalid(locate(e, bytes))),
    };
    if let Err(e) = de.end() {
        return Err(ApiError::invalid(FieldError::new(
            vec![json!("body"), json!(e.column())],
            "json_invalid",
            format!("JSON decode error: {e}"),
        )));
    }
    // A struct also deserializes from an array of its fields: refuse one where the type
    // (and the document) has an object.
    if bytes.contains(&b'[')
        && let Ok(raw) = serde_json::from_slice::<Value>(bytes)
        && let Some(at) = crate::body_shape::misplaced_list::<T>(&raw)
    {
        let mut loc = vec![json!("body")];
        loc.extend(at);
        return Err(ApiError::invalid(FieldError::new(
            loc,
            "model_attributes_type",
            "Input should be a valid dictionary or object to extract fields from",
        )));
    }
    Ok(value)
}

fn locate(error: serde_path_to_error::Error<serde_json::Error>, bytes: &[u8]) -> FieldError {
    let inner = error.inner();
    if inner.is_syntax() || inner.is_eof() || std::str::from_utf8(bytes).is_err() {
        let at = byte_offset(bytes, inner.line(), inner.column());
        return FieldError::new(vec![json!("body"), json!(at)], "json_invalid", format!("JSON decode error: {inner}"));
    }
    let mut loc = vec![json!("body")];
    for segment in error.path().iter() {
        match segment {
            serde_path_to_error::Segment::Map { key } => loc.push(json!(key)),
            serde_path_to_error::Segment::Seq { index } => loc.push(json!(index)),
            serde_path_to_error::Segment::Enum { variant } => loc.push(json!(variant)),
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    let message = strip_position(&inner.to_string());
    if let Some(field) = between(&message, "missing field `", "`") {
        loc.push(json!(field));
        return FieldError::new(loc, "missing", "Field required");
    }
    let kind = if message.starts_with("unknown variant") {
        "enum"
    } else if let Some(expected) = message.split("expected ").nth(1) {
        match expected {
            e if e.contains("string") || e.contains("char") => "string_type",
            e if e.contains("bool") => "bool_type",
            e if e.contains("i8")
                || e.contains("i16")
                || e.contains("i32")
                || e.contains("i64")
                || e.contains("u8")
                || e.contains("u16")
                || e.contains("u32")
                || e.contains("u64")
                || e.contains("integer") =>
            {
                "int_type"
            }
            e if e.contains("f32") || e.contains("f64") || e.contains("number") => "float_type",
            e if e.contains("sequence") || e.contains("array") => "list_type",
            e if e.contains("map") || e.contains("struct") || e.contains("object") => "dict_type",
            _ => "value_error",
        }
    } else {
        "value_error"
    };
    FieldError::new(loc, kind, message)
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(&text[from..from + len])
}

fn byte_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in bytes.split(|b| *b == b'\n').enumerate() {
        if i + 1 == line {
            return offset + column.saturating_sub(1);
        }
        offset += l.len() + 1;
    }
    offset
}

/// The query string, read by name with typed getters that answer 422 naming the
/// parameter. Repeated parameters (`labels=a&labels=b`) are lists.
#[derive(Debug, Clone, Default)]
pub struct Params(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::parse(parts.uri.query().unwrap_or("")))
    }
}

impl Params {
    /// Reads a query string.
    pub fn parse(query: &str) -> Self {
        Self(form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
    }

    /// The last value given for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value given for `name`, in order.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
    }

    /// A string parameter.
    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }

    /// A number parameter.
    pub fn number<T: FromStr>(&self, name: &str) -> ApiResult<Option<T>> {
        match self.get(name) {
            None => Ok(None),
            Some(text) => text.trim().parse().map(Some).map_err(|_| {
                ApiError::invalid(
                    FieldError::query(
                        name,
                        "int_parsing",
                        "Input should be a valid integer, unable to parse string as an integer",
                    )
                    .with_input(json!(text)),
                )
            }),
        }
    }

    /// A number parameter within `min..=max`.
    pub fn bounded(&self, name: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
        let value = self.number::<i64>(name)?;
        if let Some(v) = value
            && (v < min || v > max)
        {
            let (kind, msg) = if v < min {
                ("greater_than_equal", format!("Input should be greater than or equal to {min}"))
            } else {
                ("less_than_equal", format!("Input should be less than or equal to {max}"))
            };
            return Err(ApiError::invalid(FieldError::query(name, kind, msg).with_input(json!(self.get(name)))));
        }
        Ok(value)
    }

    /// A boolean parameter (`true/false`, `1/0`, `yes/no`, `on/off`).
    pub fn boolean(&self, name: &str) -> ApiResult<Option<bool>> {
        match self.get(name).map(|t| t.trim().to_ascii_lowercase()) {
            None => Ok(None),
            Some(t) => match t.as_str() {
                "true" | "1" | "yes" | "on" | "t" | "y" => Ok(Some(true)),
                "false" | "0" | "no" | "off" | "f" | "n" => Ok(Some(false)),
                _ => Err(ApiError::invalid(
                    FieldError::query(
                        name,
                        "bool_parsing",
                        "Input should be a valid boolean, unable to interpret input",
                    )
                    .with_input(json!(t)),
                )),
            },
        }
    }

    /// A parameter with a fixed set of wire values (an enum that deserializes from a string).
    pub fn choice<T: DeserializeOwned>(&self, name: &str, allowed: &[&str]) -> ApiResult<Option<T>> {
        match self.get(name) {
            None => Ok(None),
            Some(text) => serde_json::from_value(Value::String(text.to_string())).map(Some).map_err(|_| {
                let options = allowed.iter().map(|a| format!("'{a}'")).collect::<Vec<_>>().join(", ");
                ApiError::invalid(
                    FieldError::query(name, "enum", format!("Input should be {options}")).with_input(json!(text)),
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Thing {
        name: String,
        count: Option<u32>,
        mode: Option<Mode>,
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fluid,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        value: String,
    }

    fn error_of(body: &str) -> FieldError {
        match parse_body::<Thing>(body.as_bytes()) {
            Err(ApiError::Validation(mut errors)) => errors.remove(0),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn problems_are_located_like_fastapi_does() {
        let e = error_of(r#"{"count": 1}"#);
        assert_eq!((e.loc, e.kind.as_str()), (vec![json!("body"), json!("name")], "missing"));
        let e = error_of(r#"{"name": 5}"#);
        assert_eq!((e.loc, e.kind.as_str()), (vec![json!("body"), json!("name")], "string_type"));
        let e = error_of(r#"{"name": "x", "mode": "nope"}"#);
        assert_eq!((e.loc, e.kind.as_str()), (vec![json!("body"), json!("mode")], "enum"));
        let e = error_of(r#"{"name": "x", "items": [{"value": 1}]}"#);
        assert_eq!(e.loc, vec![json!("body"), json!("items"), json!(0), json!("value")]);
        let e = error_of(r#"{"name": "x", "count": -1}"#);
        assert_eq!(e.loc, vec![json!("body"), json!("count")]);
        assert_eq!(error_of(r#"{"name": "#).kind, "json_invalid");
        assert_eq!(error_of("").kind, "missing");
        assert_eq!(error_of(r#"{"name": "x"} trailing"#).kind, "json_invalid");
        let deep = format!("{{\"name\": \"x\", \"items\": {}{}}}", "[".repeat(40), "]".repeat(40));
        assert_eq!(error_of(&deep).kind, "json_too_deep");
        let nested = br#"{"a": "[[[[", "b": [1, {"c": []}]}"#;
        assert_eq!(guidepost_core::definition::text::first_too_deep(nested, 4), None);
        assert_eq!(
            guidepost_core::definition::text::first_too_deep(nested, 3),
            nested.iter().rposition(|&b| b == b'[')
        );
        let bad_utf8 = parse_body::<Thing>(b"{\"name\": \"\xff\"}");
        assert!(matches!(bad_utf8, Err(ApiError::Validation(e)) if e[0].kind == "json_invalid"));
    }

    #[test]
    fn query_parameters_are_typed() {
        let p = Params::parse("limit=abc&labels=a&labels=b&sse=TRUE&kinds=message,tool");
        assert!(p.number::<u32>("limit").is_err());
        assert_eq!(p.list("labels"), ["a", "b"]);
        assert_eq!(p.boolean("sse").unwrap(), Some(true));
        assert_eq!(p.boolean("missing").unwrap(), None);
        let p = Params::parse("limit=1000");
        assert!(p.bounded("limit", 1, 100).is_err());
        assert_eq!(Params::parse("limit=7").bounded("limit", 1, 100).unwrap(), Some(7));
    }
}
