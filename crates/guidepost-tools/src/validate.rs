//! Argument validation and coercion against a tool's declared parameters, done before any
//! call so a tool never sees arguments that do not fit.
//!
//! Models produce arguments as strings (`"3"`, `"true"`, `"2026-12-01"`), so values are
//! parsed into their declared types and normalised:
//!
//! | Type | Accepted | Normalised to |
//! |---|---|---|
//! | `string` | string, number, boolean | string |
//! | `integer` | integer, integral float, numeric string | JSON integer |
//! | `number` | number, numeric string | JSON number |
//! | `boolean` | boolean, `true/false/yes/no/1/0` (any case) | JSON boolean |
//! | `date` | `YYYY-MM-DD` | `YYYY-MM-DD` |
//! | `datetime` | RFC 3339, or `YYYY-MM-DD[T ]HH:MM[:SS]` taken as UTC | RFC 3339 with offset |
//! | `timedelta` | `90s`, `15m`, `1h30m`, `2d`, `500ms`, or a number of seconds | the trimmed text (`"90s"` for numbers) |
//! | `uuid` | any UUID spelling | lowercase hyphenated |
//! | `path` | non-empty string | string |
//! | `array` | array, or a string holding a JSON array | array of validated items |
//!
//! Enumerated strings match case-insensitively and become the declared spelling. `null`
//! counts as absent; absent parameters take their default; missing required parameters,
//! unknown arguments and invalid values are all reported at once.

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use guidepost_core::tool::{ParameterType, Tool, ToolParameter};
use serde_json::{Map, Number, Value};

use crate::result::{ArgumentProblem, ProblemKind};

/// Validates and coerces `args` for `tool`. Returns the arguments to send (declared order,
/// defaults filled, absent optional parameters left out) or every problem found.
pub fn validate_arguments(tool: &Tool, args: &Map<String, Value>) -> Result<Map<String, Value>, Vec<ArgumentProblem>> {
    let mut problems = Vec::new();
    for (name, value) in args {
        if !tool.parameters.iter().any(|p| &p.name == name) {
            problems.push(ArgumentProblem {
                parameter: name.clone(),
                problem: ProblemKind::Unknown,
                message: format!("`{}` has no parameter `{name}`", tool.id),
                value: Some(value.clone()),
                hidden: false,
            });
        }
    }
    let mut out = Map::new();
    for param in &tool.parameters {
        let given = args.get(&param.name).filter(|v| !v.is_null());
        let Some(value) = given.or(param.default.as_ref()) else {
            if param.required {
                problems.push(ArgumentProblem {
                    parameter: param.name.clone(),
                    problem: ProblemKind::Missing,
                    message: "required parameter is missing".into(),
                    value: None,
                    hidden: param.hidden,
                });
            }
            continue;
        };
        match coerce_parameter(param, value) {
            Ok(v) => {
                out.insert(param.name.clone(), v);
            }
            Err(message) => problems.push(ArgumentProblem {
                parameter: param.name.clone(),
                problem: ProblemKind::Invalid,
                message,
                value: Some(value.clone()),
                hidden: param.hidden,
            }),
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

/// Coerces one value to a parameter's type and checks its allowed values.
pub fn coerce_parameter(param: &ToolParameter, value: &Value) -> Result<Value, String> {
    if param.kind == ParameterType::Array {
        let items = match value {
            Value::Array(items) => items.clone(),
            Value::String(text) => match serde_json::from_str::<Value>(text.trim()) {
                Ok(Value::Array(items)) => items,
                _ => return Err(format!("expected a list, got the text {text:?}")),
            },
            other => return Err(format!("expected a list, got {}", describe(other))),
        };
        let item_kind = param.items.unwrap_or(ParameterType::String);
        return items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                coerce(item_kind, item)
                    .and_then(|v| check_allowed(&param.allowed, v))
                    .map_err(|e| format!("item {i}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    coerce(param.kind, value).and_then(|v| check_allowed(&param.allowed, v))
}

fn check_allowed(allowed: &[Value], value: Value) -> Result<Value, String> {
    if allowed.is_empty() || allowed.contains(&value) {
        return Ok(value);
    }
    if let Value::String(text) = &value {
        let wanted = text.trim().to_lowercase();
        if let Some(hit) = allowed.iter().find(|a| a.as_str().is_some_and(|s| s.to_lowercase() == wanted)) {
            return Ok(hit.clone());
        }
    }
    let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
    Err(format!("{value} is not one of the allowed values: {}", list.join(", ")))
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn coerce(kind: ParameterType, value: &Value) -> Result<Value, String> {
    let text = value.as_str().map(str::trim);
    match kind {
        ParameterType::String => match value {
            Value::String(s) => Ok(Value::String(s.clone())),
            Value::Number(n) => Ok(Value::String(n.to_string())),
            Value::Bool(b) => Ok(Value::String(b.to_string())),
            other => Err(format!("expected text, got {}", describe(other))),
        },
        ParameterType::Integer => match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(value.clone()),
            Value::Number(n) => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::from(f as i64)),
                _ => Err(format!("expected a whole number, got {n}")),
            },
            Value::String(_) => {
                let t = text.unwrap_or_default();
                t.parse::<i64>().map(Value::from).map_err(|_| format!("expected a whole number, got {t:?}"))
            }
            other => Err(format!("expected a whole number, got {}", describe(other))),
        },
        ParameterType::Number => match value {
            Value::Number(_) => Ok(value.clone()),
            Value::String(_) => {
                let t = text.unwrap_or_default();
                t.parse::<f64>()
                    .ok()
                    .and_then(|f| {
                        if f.fract() == 0.0 && f.abs() < 9.0e15 {
                            Some(Value::from(f as i64))
                        } else {
                            Number::from_f64(f).map(Value::Number)
                        }
                    })
                    .ok_or_else(|| format!("expected a number, got {t:?}"))
            }
            other => Err(format!("expected a number, got {}", describe(other))),
        },
        ParameterType::Boolean => match value {
            Value::Bool(_) => Ok(value.clone()),
            Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                Ok(Value::Bool(n.as_i64() == Some(1)))
            }
            Value::String(_) => match text.unwrap_or_default().to_lowercase().as_str() {
                "true" | "yes" | "y" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "n" | "0" => Ok(Value::Bool(false)),
                other => Err(format!("expected true or false, got {other:?}")),
            },
            other => Err(format!("expected true or false, got {}", describe(other))),
        },
        ParameterType::Date => {
            let t = text.ok_or_else(|| format!("expected a date (YYYY-MM-DD), got {}", describe(value)))?;
            NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .map(|d| Value::String(d.format("%Y-%m-%d").to_string()))
                .map_err(|_| format!("expected a date (YYYY-MM-DD), got {t:?}"))
        }
        ParameterType::Datetime => {
            let t = text.ok_or_else(|| format!("expected a date and time (RFC 3339), got {}", describe(value)))?;
            parse_datetime(t).map(|d| Value::String(d.to_rfc3339())).ok_or_else(|| {
                format!("expected a date and time (RFC 3339, e.g. 2026-12-01T18:30:00+00:00), got {t:?}")
            })
        }
        ParameterType::Timedelta => match value {
            Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0) => Ok(Value::String(format!("{n}s"))),
            Value::String(_) => {
                let t = text.unwrap_or_default();
                parse_timedelta_seconds(t)
                    .map(|_| Value::String(t.to_string()))
                    .ok_or_else(|| format!("expected a duration such as 90s, 15m, 1h30m or 2d, got {t:?}"))
            }
            other => Err(format!("expected a duration such as 15m, got {}", describe(other))),
        },
        ParameterType::Uuid => {
            let t = text.ok_or_else(|| format!("expected a UUID, got {}", describe(value)))?;
            uuid::Uuid::parse_str(t)
                .map(|u| Value::String(u.hyphenated().to_string()))
                .map_err(|_| format!("expected a UUID, got {t:?}"))
        }
        ParameterType::Path => match text {
            Some(t) if !t.is_empty() && !t.contains('\0') => Ok(Value::String(t.to_string())),
            _ => Err(format!("expected a path, got {}", describe(value))),
        },
        ParameterType::Array => match value {
            Value::Array(_) => Ok(value.clone()),
            other => Err(format!("expected a list, got {}", describe(other))),
        },
    }
}

fn parse_datetime(text: &str) -> Option<DateTime<chrono::FixedOffset>> {
    if let Ok(d) = DateTime::parse_from_rfc3339(text) {
        return Some(d);
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .map(|naive| naive.and_utc().fixed_offset())
}

/// Parses a duration such as `90s`, `15m`, `1h30m`, `2d`, `1w` or `250ms` into seconds.
pub fn parse_timedelta_seconds(text: &str) -> Option<f64> {
    let text = text.trim().to_lowercase();
    if text.is_empty() {
        return None;
    }
    let mut total = 0.0;
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let amount: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            "w" | "week" | "weeks" => 604_800.0,
            _ => return None,
        };
        total += amount * factor;
        rest = rest[unit_len..].trim_start();
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::native::parameter;
    use serde_json::json;

    fn one(kind: ParameterType, value: Value) -> Result<Value, String> {
        coerce_parameter(&parameter("p", kind), &value)
    }

    #[test]
    fn type_table() {
        use ParameterType::*;
        let ok = [
            (String, json!(42), json!("42")),
            (Integer, json!("  7 "), json!(7)),
            (Integer, json!(3.0), json!(3)),
            (Number, json!("2.5"), json!(2.5)),
            (Number, json!("4"), json!(4)),
            (Boolean, json!("Yes"), json!(true)),
            (Boolean, json!("false"), json!(false)),
            (Boolean, json!(0), json!(false)),
            (Date, json!("2026-12-01"), json!("2026-12-01")),
            (Datetime, json!("2026-12-01T18:30:00Z"), json!("2026-12-01T18:30:00+00:00")),
            (Datetime, json!("2026-12-01 18:30"), json!("2026-12-01T18:30:00+00:00")),
            (Timedelta, json!("15m"), json!("15m")),
            (Timedelta, json!("1h 30m"), json!("1h 30m")),
            (Timedelta, json!(90), json!("90s")),
            (Uuid, json!("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
            (Path, json!("/tmp/x"), json!("/tmp/x")),
        ];
        for (kind, input, expected) in ok {
            assert_eq!(one(kind, input.clone()), Ok(expected), "{kind:?} {input}");
        }
        let bad = [
            (String, json!({"a": 1})),
            (Integer, json!("3.7")),
            (Integer, json!(3.5)),
            (Integer, json!("seven")),
            (Number, json!("NaN-ish")),
            (Boolean, json!("maybe")),
            (Date, json!("2026-13-01")),
            (Date, json!("01/12/2026")),
            (Datetime, json!("tomorrow")),
            (Timedelta, json!("soon")),
            (Timedelta, json!("15x")),
            (Uuid, json!("not-a-uuid")),
            (Path, json!("")),
            (Array, json!("nope")),
        ];
        for (kind, input) in bad {
            assert!(one(kind, input.clone()).is_err(), "{kind:?} {input} should fail");
        }
    }

    #[test]
    fn timedeltas_parse_to_seconds() {
        assert_eq!(parse_timedelta_seconds("1h30m"), Some(5400.0));
        assert_eq!(parse_timedelta_seconds("250ms"), Some(0.25));
        assert_eq!(parse_timedelta_seconds("2 days"), Some(172_800.0));
        assert_eq!(parse_timedelta_seconds("m"), None);
    }

    #[test]
    fn arrays_and_enums() {
        let mut p = parameter("tags", ParameterType::Array);
        p.items = Some(ParameterType::Integer);
        assert_eq!(coerce_parameter(&p, &json!(["1", 2])), Ok(json!([1, 2])));
        assert_eq!(coerce_parameter(&p, &json!("[3, 4]")), Ok(json!([3, 4])));
        let err = coerce_parameter(&p, &json!([1, "x"])).unwrap_err();
        assert!(err.starts_with("item 1:"), "{err}");
        let mut e = parameter("unit", ParameterType::String);
        e.allowed = vec![json!("celsius"), json!("fahrenheit")];
        assert_eq!(coerce_parameter(&e, &json!("Celsius ")), Ok(json!("celsius")));
        let err = coerce_parameter(&e, &json!("kelvin")).unwrap_err();
        assert!(err.contains("\"celsius\", \"fahrenheit\""), "{err}");
    }
}
