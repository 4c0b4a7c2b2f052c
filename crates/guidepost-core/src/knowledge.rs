//! What the agent knows besides its rules: tags, context variables, glossary terms,
//! capabilities and canned responses.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A tag scopes guidelines, journeys and other entities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    /// Stable id (the tag's name unless given).
    pub id: String,
    /// Name.
    pub name: String,
    /// What the tag groups.
    pub description: Option<String>,
}

/// A named value given to the model as context. Values are set per customer, per
/// customer tag or globally; a tool-backed variable is refreshed by calling its tool once
/// its value is older than `freshness`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextVariable {
    /// Stable id.
    pub id: String,
    /// Name, as shown to the model.
    pub name: String,
    /// What the value means.
    pub description: Option<String>,
    /// Tool that produces the value.
    pub tool: Option<crate::tool::ToolId>,
    /// How long a tool-produced value stays fresh.
    #[serde(default)]
    pub freshness: Option<Freshness>,
    /// Global default value.
    pub value: Option<serde_json::Value>,
    /// Tag ids.
    pub tags: Vec<String>,
}

/// A glossary term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    /// Stable id.
    pub id: String,
    /// The term.
    pub name: String,
    /// What it means.
    pub description: String,
    /// Other words customers use for it.
    pub synonyms: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

/// Something the agent can do, offered when relevant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// Stable id.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What the agent can do.
    pub description: String,
    /// Phrases that signal a customer wants it.
    pub signals: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

/// A field a canned-response template fills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CannedField {
    /// Field name as used in the template.
    pub name: String,
    /// What it holds.
    pub description: Option<String>,
    /// Example values.
    pub examples: Vec<String>,
}

/// An approved reply template (Jinja syntax, e.g. `Your balance is {{balance}}.`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CannedResponse {
    /// Stable id.
    pub id: String,
    /// The template.
    pub template: String,
    /// Declared fields.
    pub fields: Vec<CannedField>,
    /// Phrases that describe when the template fits.
    pub signals: Vec<String>,
    /// Fields that must be available for the template to be a candidate.
    pub field_dependencies: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

/// Parses durations written as `90s`, `15m`, `2h`, `1d` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number.parse().ok()?;
    let secs = match unit.trim() {
        "s" | "sec" | "secs" => n,
        "m" | "min" | "mins" => n.checked_mul(60)?,
        "h" | "hour" | "hours" => n.checked_mul(3600)?,
        "d" | "day" | "days" => n.checked_mul(86_400)?,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// Formats a duration the way [`parse_duration`] reads it, in the largest exact unit.
pub fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => "0s".to_string(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// How long a tool-produced value stays fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// For this long after it was set (`90s`, `15m`, `2h`, `1d`).
    For(Duration),
    /// Until the schedule's first tick after it was set (a cron schedule, as the
    /// reference API's `freshness_rules`).
    Until(crate::cron::CronSchedule),
}

impl Freshness {
    /// Reads a duration (`15m`) or else a cron schedule (`0 * * * *`).
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(d) = parse_duration(text) {
            return Ok(Self::For(d));
        }
        crate::cron::CronSchedule::parse(text)
            .map(Self::Until)
            .map_err(|e| format!("`{text}` is neither a duration (`30s`, `15m`, `1h`, `1d`) nor a cron schedule: {e}"))
    }

    /// Whether a value set at `set` is stale at `now`.
    pub fn is_stale(&self, set: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> bool {
        match self {
            Self::For(d) => chrono::Duration::from_std(*d).map(|d| set + d <= now).unwrap_or(true),
            Self::Until(schedule) => schedule.next_after(set).is_some_and(|next| next <= now),
        }
    }

    /// The freshness as written in definition files.
    pub fn to_text(&self) -> String {
        match self {
            Self::For(d) => format_duration(*d),
            Self::Until(s) => s.as_str().to_string(),
        }
    }
}

impl Serialize for Freshness {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_text())
    }
}

impl<'de> Deserialize<'de> for Freshness {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Seconds(u64),
            Text(String),
        }
        match Wire::deserialize(d)? {
            Wire::Seconds(n) => Ok(Self::For(Duration::from_secs(n))),
            Wire::Text(t) => Self::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_is_a_duration_or_a_schedule() {
        use chrono::TimeZone;
        let set = chrono::Utc.with_ymd_and_hms(2026, 11, 25, 14, 30, 0).unwrap();
        let hourly = Freshness::parse("0 * * * *").unwrap();
        assert!(!hourly.is_stale(set, set + chrono::Duration::minutes(29)));
        assert!(hourly.is_stale(set, set + chrono::Duration::minutes(30)));
        let quarter = Freshness::parse("15m").unwrap();
        assert!(!quarter.is_stale(set, set + chrono::Duration::minutes(14)));
        assert!(quarter.is_stale(set, set + chrono::Duration::minutes(15)));
        assert!(Freshness::parse("soon").unwrap_err().contains("neither a duration"));
        let json = serde_json::to_string(&Some(hourly.clone())).unwrap();
        assert_eq!(serde_json::from_str::<Option<Freshness>>(&json).unwrap(), Some(hourly));
        assert_eq!(serde_json::from_str::<Freshness>("900").unwrap(), quarter);
    }

    #[test]
    fn durations_round_trip() {
        for text in ["90s", "15m", "2h", "1d", "0s"] {
            let parsed = parse_duration(text);
            assert!(parsed.is_some(), "{text}");
            assert_eq!(parsed.map(format_duration).as_deref(), Some(text));
        }
        assert_eq!(parse_duration("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("5 weeks"), None);
        assert_eq!(parse_duration("m"), None);
    }
}
