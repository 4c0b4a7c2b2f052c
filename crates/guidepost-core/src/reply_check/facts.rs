//! Facts stated in a reply, and where the agent may have them from.
//!
//! The facts checked are the ones a customer acts on and a model invents most readily:
//! figures (amounts, temperatures, percentages, times, dates, order and phone numbers). A
//! figure is grounded when it appears in what the agent was given: tool results, context
//! variables, glossary, the agent's definition, the conversation itself, or the date.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::AgentDefinition;

/// A figure as written in a text.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Figure {
    /// As written (`$15,000`, `10:00`, `3.5%`).
    pub text: String,
    /// The digits and inner separators, thousands separators removed (`15000`, `10:00`).
    pub normalized: String,
    /// The value, when it is a plain number.
    pub value: Option<f64>,
    /// Whether a unit, currency or percent sign is attached.
    pub has_unit: bool,
    /// Whether it starts a line as a list marker (`1.` or `2)`).
    pub list_marker: bool,
    /// Whether it is written as part of a date (`25th`, `11月26日`, `November 26`).
    pub date_like: bool,
}

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
];

/// Whether the figure between `before` and `after` is written as part of a date.
fn is_date_like(before: &[char], after: &[char]) -> bool {
    let next: String = after.iter().skip_while(|c| **c == ' ').take(12).collect::<String>().to_lowercase();
    if next.starts_with(['日', '号', '月', '年']) {
        return true;
    }
    let suffix: String = next.chars().take_while(char::is_ascii_alphabetic).collect();
    if matches!(suffix.as_str(), "st" | "nd" | "rd" | "th") || MONTHS.contains(&suffix.as_str()) {
        return true;
    }
    let previous: String = before
        .iter()
        .rev()
        .skip_while(|c| **c == ' ' || **c == ',')
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .chars()
        .rev()
        .collect::<String>()
        .to_lowercase();
    MONTHS.contains(&previous.as_str())
}

const UNIT_AFTER: &[char] = &['%', '°', '℃', '℉', '度', '元', '円', '€', '$', '£', '¥', '号', '月', '日', '年'];
const UNIT_BEFORE: &[char] = &['$', '€', '£', '¥', '₹', '₩', '#'];

/// Every figure in `text`: runs of digits joined by single `.`, `,` or `:` between digits.
pub(super) fn figures(text: &str) -> Vec<Figure> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        // Digits inside an identifier (`ORD123`, `B2B`) are not a figure.
        if i > 0 && chars[i - 1].is_ascii_alphabetic() {
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',' | ':') && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        let raw: String = chars[start..i].iter().collect();
        let normalized = normalize(&raw);
        let value = normalized.parse::<f64>().ok();
        let before = start.checked_sub(1).map(|j| chars[j]);
        let after = chars[i..].iter().find(|c| **c != ' ').copied();
        let has_unit = before.is_some_and(|c| UNIT_BEFORE.contains(&c))
            || after.is_some_and(|c| UNIT_AFTER.contains(&c))
            || raw.contains(':');
        let line_start = chars[..start].iter().rev().take_while(|c| **c != '\n').all(|c| c.is_whitespace());
        let list_marker = line_start && matches!(chars.get(i), Some('.' | ')' | '、'));
        let date_like = is_date_like(&chars[..start], &chars[i..]);
        out.push(Figure { text: raw, normalized, value, has_unit, list_marker, date_like });
    }
    out
}

/// Removes thousands separators (`15,000` → `15000`); a comma before fewer or more than
/// three digits is a decimal comma (`3,5` → `3.5`).
fn normalize(raw: &str) -> String {
    if raw.contains(':') {
        return raw.to_string();
    }
    let groups: Vec<&str> = raw.split(',').collect();
    if groups.len() > 1 && groups[1..].iter().all(|g| g.split('.').next().is_some_and(|d| d.len() == 3)) {
        return groups.concat();
    }
    raw.replace(',', ".")
}

/// What a reply's facts may come from.
#[derive(Debug, Clone, Default)]
pub struct Grounding {
    figures: BTreeSet<String>,
    values: Vec<f64>,
    /// Days, months and years of the dates added: they ground only figures written as dates.
    dates: BTreeSet<u32>,
    /// What this turn's tool calls returned (see [`Grounding::add_tool_result`]).
    turn_results: TurnResults,
}

/// This turn's tool results, as far as the `denies_tool_result` check needs them.
#[derive(Debug, Clone, Default)]
pub(super) struct TurnResults {
    /// A call failed, or returned that nothing was found.
    pub(super) any_empty: bool,
    /// The values of the calls that returned data.
    pub(super) values: Vec<String>,
}

impl Grounding {
    /// Nothing known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the agent's definition states (descriptions, instructions, journeys, tool
    /// descriptions, glossary, canned responses), leaving out tool fixtures and parameter
    /// examples: those are answers a tool may give, not facts the agent knows.
    pub fn from_definition(definition: &AgentDefinition) -> Self {
        let mut grounding = Self::new();
        if let Ok(mut value) = serde_json::to_value(definition) {
            strip_keys(&mut value, &["fixture", "examples"]);
            grounding.add_json(&value);
        }
        grounding
    }

    /// Adds the figures of a text (a message, a glossary entry, a rendered date).
    pub fn add_text(&mut self, text: &str) {
        for figure in figures(text) {
            if let Some(v) = figure.value {
                self.values.push(v);
            }
            // `10:30` also grounds its parts, `2026-11-25` each of its numbers.
            for part in figure.normalized.split(':') {
                if let Ok(v) = part.parse::<f64>() {
                    self.values.push(v);
                }
            }
            self.figures.insert(figure.normalized);
        }
    }

    /// Adds every number and string of a JSON value (a tool result, context variables).
    pub fn add_json(&mut self, value: &Value) {
        match value {
            Value::Number(n) => {
                if let Some(v) = n.as_f64() {
                    self.values.push(v);
                    self.add_text(&n.to_string());
                }
            }
            Value::String(s) => self.add_text(s),
            Value::Array(items) => items.iter().for_each(|v| self.add_json(v)),
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                self.add_text(k);
                self.add_json(v);
            }),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Adds a tool call made this turn, with its arguments and result (`ok`: whether it
    /// succeeded): both ground the reply's figures, and a reply that denies having data while
    /// every call of the turn returned some fails `denies_tool_result`. Values the result
    /// only echoes from the arguments (the city asked about) do not count as its data.
    pub fn add_tool_result(&mut self, ok: bool, arguments: &Value, result: &Value) {
        self.add_json(arguments);
        self.add_json(result);
        match super::denial::result_values(result).filter(|_| ok) {
            Some(values) => {
                let asked = super::denial::result_values(arguments).unwrap_or_default();
                let asked = asked.iter().map(|a| a.to_lowercase()).collect::<Vec<_>>();
                self.turn_results.values.extend(values.into_iter().filter(|v| !asked.contains(&v.to_lowercase())));
            }
            None => self.turn_results.any_empty = true,
        }
    }

    pub(super) fn turn_results(&self) -> &TurnResults {
        &self.turn_results
    }

    /// Adds a date and the week after it (a reply may say what "tomorrow" is). They ground
    /// only figures written as dates (`26日`, `November 26th`), not a temperature of 26.
    pub fn add_date(&mut self, now: chrono::DateTime<chrono::Utc>) {
        use chrono::Datelike;
        for day in 0..8 {
            let d = now + chrono::Duration::days(day);
            self.dates.extend([d.day(), d.month(), u32::try_from(d.year()).unwrap_or_default()]);
        }
    }

    pub(super) fn grounds(&self, figure: &Figure) -> bool {
        if self.figures.contains(&figure.normalized) {
            return true;
        }
        if figure.date_like && figure.normalized.parse::<u32>().is_ok_and(|n| self.dates.contains(&n)) {
            return true;
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
        match figure.value {
            // A rounded figure of a known one (`15.3` said as `15`) is grounded too.
            Some(v) => self.values.iter().any(|k| close(*k, v) || (v.fract() == 0.0 && close(k.round(), v))),
            None => {
                figure
                    .normalized
                    .split(':')
                    .all(|p| p.parse::<f64>().is_ok_and(|v| self.values.iter().any(|k| close(*k, v))) && p.len() <= 2)
                    && self.figures.iter().any(|f| f.contains(':'))
            }
        }
    }
}

fn strip_keys(value: &mut Value, keys: &[&str]) {
    match value {
        Value::Object(map) => {
            for key in keys {
                map.remove(*key);
            }
            map.values_mut().for_each(|v| strip_keys(v, keys));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip_keys(v, keys)),
        _ => {}
    }
}

/// Whether `figure` is a fact worth checking: not a list marker, nor a small count without
/// a unit ("2 options").
fn worth_checking(figure: &Figure) -> bool {
    !figure.list_marker
        && (figure.has_unit || !figure.value.is_some_and(|v| v.fract() == 0.0 && (0.0..=10.0).contains(&v)))
}

/// The figures of `reply` that nothing grounds.
pub(super) fn ungrounded(reply: &str, grounding: &Grounding) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for figure in figures(reply) {
        if worth_checking(&figure) && !grounding.grounds(&figure) && !out.contains(&figure.text) {
            out.push(figure.text);
        }
    }
    out
}

/// Figures of `reply` that only the conversation grounds, moved from what the customer named
/// before to what their latest message names, as `figure (new subject)`. A figure counts as
/// moved when, in a sentence of the reply:
/// - nothing of this turn gives it (`grounding`: the definition, this turn's tool results,
///   variables, glossary, the date), only messages of `history` do;
/// - every message that gives it names something an earlier message of the customer named
///   (the subject it was given for), and the sentence names none of that;
/// - and the sentence names something of the customer's latest message that no message
///   giving the figure names.
///
/// "好的，北京现在多云，气温 20°C" after "上海" was answered "上海现在多云，气温 20°C" and the
/// customer asked "那北京呢？" moves 20°C from 上海 to 北京. Repeating a figure for what it was
/// given for, or one the customer's latest message states itself, is no move.
pub(super) fn borrowed(reply: &str, grounding: &Grounding, history: &[(String, String)]) -> Vec<String> {
    let Some(latest) = history.iter().rposition(|(who, _)| who == "customer") else { return Vec::new() };
    let asked_now = names(&history[latest].1);
    let named_before: BTreeSet<String> =
        history[..latest].iter().filter(|(who, _)| who == "customer").flat_map(|(_, text)| names(text)).collect();
    if asked_now.is_empty() || named_before.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for sentence in sentences(reply) {
        let said = sentence.to_lowercase();
        let now: Vec<&String> = asked_now.iter().filter(|n| said.contains(n.as_str())).collect();
        if now.is_empty() {
            continue;
        }
        for figure in figures(sentence) {
            if !worth_checking(&figure) || grounding.grounds(&figure) {
                continue;
            }
            let givers: Vec<String> = history
                .iter()
                .filter(|(_, text)| {
                    let mut given = Grounding::new();
                    given.add_text(text);
                    given.grounds(&figure)
                })
                .map(|(_, text)| text.to_lowercase())
                .collect();
            // The subject a message gave the figure for: what it names that the customer named
            // before. The figure moved when the sentence names none of it ("From 12 Oak Street
            // to terminal 2" keeps 12 with Oak Street, though it leaves out the "cab" of "I
            // need a cab from 12 Oak Street").
            let given_for_another = |text: &String| {
                let mut subject = named_before.iter().filter(|n| text.contains(n.as_str())).peekable();
                subject.peek().is_some() && subject.all(|n| !said.contains(n.as_str()))
            };
            if givers.is_empty() || !givers.iter().all(given_for_another) {
                continue;
            }
            let new_subject = now
                .iter()
                .filter(|n| !givers.iter().any(|text| text.contains(n.as_str())))
                .max_by_key(|n| n.chars().count());
            if let Some(subject) = new_subject {
                let item = format!("{} ({subject})", figure.text);
                if !out.contains(&item) {
                    out.push(item);
                }
            }
        }
    }
    out
}

/// Words a message may name a subject with, lowercased: its words of three letters or more
/// (two or more digits) in alphabetic scripts, and every run of two to four characters of its
/// Chinese, Japanese or Korean text, leaving out the commonest words that name nothing.
fn names(text: &str) -> BTreeSet<String> {
    const COMMON: &[&str] = &[
        "the", "and", "what", "about", "how", "with", "that", "this", "for", "you", "your", "please", "thanks",
        "thank", "can", "could", "would", "also", "then", "just", "there", "here", "hello", "yes", "not", "any",
        "好的", "谢谢", "什么", "怎么", "还有", "一下", "可以", "请问", "你好", "您好", "那么", "然后", "这个", "那个",
        "我们", "你们", "是的", "不是", "没有",
    ];
    let lowered = text.to_lowercase();
    let mut out = BTreeSet::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush = |word: &mut String, run: &mut Vec<char>, out: &mut BTreeSet<String>| {
        let digits = word.chars().all(|c| c.is_ascii_digit());
        if word.chars().count() >= 3 || (digits && word.len() >= 2) {
            out.insert(std::mem::take(word));
        }
        word.clear();
        for len in 2..=4 {
            for piece in run.windows(len) {
                out.insert(piece.iter().collect());
            }
        }
        run.clear();
    };
    for c in lowered.chars() {
        if super::voice::is_dense_script(c) {
            if !word.is_empty() {
                let mut none = Vec::new();
                flush(&mut word, &mut none, &mut out);
            }
            run.push(c);
        } else if c.is_alphanumeric() {
            if !run.is_empty() {
                let mut none = String::new();
                flush(&mut none, &mut run, &mut out);
            }
            word.push(c);
        } else {
            flush(&mut word, &mut run, &mut out);
        }
    }
    flush(&mut word, &mut run, &mut out);
    out.retain(|n| !COMMON.contains(&n.as_str()));
    out
}

/// The sentences of `text`: split after `。！？；`, a line break, and `.!?;` followed by a space
/// or the end (a decimal point is not an end).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|(_, n)| n.is_whitespace());
        let ends =
            matches!(c, '。' | '！' | '？' | '；' | '\n') || (matches!(c, '.' | '!' | '?' | ';') && next_is_space);
        if ends {
            let end = i + c.len_utf8();
            out.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn figures_are_read_with_separators_and_units() {
        let f = figures("Your balance is $15,000.50; pickup at 10:00, humidity 45%.\n1. Beijing");
        let norm: Vec<&str> = f.iter().map(|f| f.normalized.as_str()).collect();
        assert_eq!(norm, ["15000.50", "10:00", "45", "1"]);
        assert!(f[0].has_unit && f[1].has_unit && f[2].has_unit);
        assert!(f[3].list_marker);
        assert!(figures("order ORD123 and B2B").is_empty(), "digits inside identifiers are not figures");
    }

    #[test]
    fn figures_from_tool_results_ground_the_reply() {
        let mut g = Grounding::new();
        g.add_json(&json!({"city": "上海", "temperature": 20, "humidity": 60, "balance": 15000.0}));
        assert!(ungrounded("上海今天多云，气温20度，湿度60%。", &g).is_empty());
        assert!(ungrounded("Your balance is $15,000.", &g).is_empty());
        assert_eq!(ungrounded("明天巴黎气温18度，湿度70%。", &g), ["18", "70"]);
        assert_eq!(ungrounded("Pickup at 10:00 AM.", &g), ["10:00"]);
        assert!(ungrounded("There are 2 options.", &g).is_empty());
    }

    #[test]
    fn dates_ground_only_figures_written_as_dates() {
        let mut g = Grounding::new();
        g.add_date(chrono::DateTime::parse_from_rfc3339("2026-11-25T10:00:00Z").unwrap().to_utc());
        assert!(ungrounded("明天是11月26日。", &g).is_empty());
        assert!(ungrounded("Tomorrow, November 26th, it is open.", &g).is_empty());
        assert_eq!(ungrounded("It will be 26 degrees.", &g), ["26"]);
    }

    fn conversation(turns: &[(&str, &str)]) -> Vec<(String, String)> {
        turns.iter().map(|(who, text)| (who.to_string(), text.to_string())).collect()
    }

    #[test]
    fn a_figure_given_for_one_city_said_of_another_is_borrowed() {
        let history = conversation(&[
            ("customer", "你好"),
            ("agent", "你好！我是小天，可以查询北京、上海、广州的天气。"),
            ("customer", "上海"),
            ("agent", "上海现在多云，气温 20°C，湿度 60%。还想查查其他城市吗？"),
            ("customer", "那北京呢？"),
        ]);
        let nothing = Grounding::new();
        assert_eq!(
            borrowed("好的，北京现在多云，气温 20°C，湿度 60%。还想查查其他城市吗？", &nothing, &history),
            ["20 (北京)", "60 (北京)"]
        );
        // Looked up this turn, the same figures are Beijing's own.
        let mut looked_up = Grounding::new();
        looked_up.add_json(&json!({"city": "北京", "temperature": 20, "humidity": 60}));
        assert!(borrowed("北京现在多云，气温 20°C，湿度 60%。", &looked_up, &history).is_empty());
        // Said again of the city it was given for, or without a figure, it is no move.
        assert!(borrowed("上海是 20°C；北京我还没有查。", &nothing, &history).is_empty());
        assert!(borrowed("我这就帮您查北京的天气。", &nothing, &history).is_empty());

        let english = conversation(&[
            ("customer", "What is the weather in Shanghai?"),
            ("agent", "It is 20°C and cloudy in Shanghai."),
            ("customer", "And in Beijing?"),
        ]);
        assert_eq!(borrowed("In Beijing it is 20°C and cloudy.", &nothing, &english), ["20 (beijing)"]);
        assert!(borrowed("Shanghai is 20°C. I have not looked up Beijing yet.", &nothing, &english).is_empty());
    }

    #[test]
    fn a_figure_said_with_what_it_was_given_for_is_not_borrowed() {
        let history = vec![
            ("customer".to_string(), "Hi, I need a cab from 12 Oak Street.".to_string()),
            ("agent".to_string(), "When would you like to be picked up?".to_string()),
            ("customer".to_string(), "To the airport, terminal 2.".to_string()),
        ];
        let reply =
            "I will pick you up from 12 Oak Street and take you to the airport, terminal 2. When should I come?";
        assert!(borrowed(reply, &Grounding::new(), &history).is_empty());
    }

    #[test]
    fn a_figure_restated_for_the_same_subject_is_not_borrowed() {
        // The customer's new words name no other subject the figure was taken from.
        let history = conversation(&[
            ("customer", "How much is the blue shirt?"),
            ("agent", "It costs $20."),
            ("customer", "What was the price again?"),
        ]);
        assert!(borrowed("The price is $20.", &Grounding::new(), &history).is_empty());
        // A figure the latest message states itself is the customer's own.
        let history = conversation(&[
            ("customer", "Is it 20°C in Shanghai?"),
            ("agent", "Yes, 20°C in Shanghai."),
            ("customer", "Is Beijing 20°C too?"),
        ]);
        assert!(borrowed("Beijing: 20°C as well, I cannot confirm it yet.", &Grounding::new(), &history).is_empty());
    }

    #[test]
    fn sentences_end_at_stops_but_not_at_decimal_points() {
        assert_eq!(sentences("It is 20.5°C. Humid! 好的。再见"), ["It is 20.5°C.", " Humid!", " 好的。", "再见"]);
    }
}
