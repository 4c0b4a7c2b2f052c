//! Cron schedules (five fields: minute, hour, day of month, month, day of week) for the
//! freshness of context variables: a value set at `t` is fresh until the schedule's first
//! tick after `t`. The syntax is the common one: `*`, numbers, ranges `a-b`, steps `*/n` and
//! `a-b/n`, lists `a,b`, month and weekday names (`JAN`, `MON`), weekday 7 for Sunday, and
//! the shorthands `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. As in cron, when
//! both the day of month and the day of week are restricted, a day matching either counts.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use guidepost_core::cron::CronSchedule;
//!
//! let every_hour = CronSchedule::parse("0 * * * *").unwrap();
//! let set = Utc.with_ymd_and_hms(2026, 11, 25, 14, 30, 0).unwrap();
//! assert_eq!(every_hour.next_after(set), Some(Utc.with_ymd_and_hms(2026, 11, 25, 15, 0, 0).unwrap()));
//! ```

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    text: String,
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    days_restricted: bool,
    weekdays_restricted: bool,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn value(text: &str, min: u32, max: u32, names: &[&str], name_base: u32) -> Result<u32, String> {
    let upper = text.to_ascii_uppercase();
    if let Some(i) = names.iter().position(|n| *n == upper) {
        return Ok(i as u32 + name_base);
    }
    let n: u32 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
    if n < min || n > max {
        return Err(format!("{n} is outside {min}-{max}"));
    }
    Ok(n)
}

/// The set of values a field allows, as a bit mask (bit `v` for value `v`).
fn field(text: &str, min: u32, max: u32, names: &[&str], name_base: u32) -> Result<u64, String> {
    let mut mask = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("`{s}` is not a step"))?;
                if step == 0 {
                    return Err("a step of 0".into());
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (from, to) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, min, max, names, name_base)?, value(b, min, max, names, name_base)?)
        } else {
            let v = value(range, min, max, names, name_base)?;
            (v, if part.contains('/') { max } else { v })
        };
        if from > to {
            return Err(format!("the range `{range}` goes backwards"));
        }
        let mut v = from;
        while v <= to {
            mask |= 1 << v;
            v += step;
        }
    }
    Ok(mask)
}

impl CronSchedule {
    /// Parses a schedule; the error says which field is wrong and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let expanded = match text.trim() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            other => other,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = parts.as_slice() else {
            return Err(format!(
                "a cron schedule has five fields (minute hour day month weekday), not {}",
                parts.len()
            ));
        };
        let named = |name: &str, r: Result<u64, String>| r.map_err(|e| format!("{name} field: {e}"));
        let mut weekdays = named("weekday", field(weekday, 0, 7, &WEEKDAYS, 0))?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f;
        }
        Ok(Self {
            text: text.trim().to_string(),
            minutes: named("minute", field(minute, 0, 59, &[], 0))?,
            hours: named("hour", field(hour, 0, 23, &[], 0))? as u32,
            days: named("day", field(day, 1, 31, &[], 0))? as u32,
            months: named("month", field(month, 1, 12, &MONTHS, 1))? as u16,
            weekdays: weekdays as u8,
            days_restricted: *day != "*",
            weekdays_restricted: *weekday != "*",
        })
    }

    /// The schedule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn day_matches(&self, t: DateTime<Utc>) -> bool {
        let dom = self.days & (1 << t.day()) != 0;
        let dow = self.weekdays & (1 << t.weekday().num_days_from_sunday()) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            (true, false) => dom,
            (false, true) => dow,
            (false, false) => true,
        }
    }

    /// The first tick strictly after `t` (`None` for a schedule that never fires, such as
    /// the 31st of February).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = t.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        let mut at = start;
        // Skipping whole months, days and hours, five years of searching takes a few
        // thousand steps at most.
        for _ in 0..100_000 {
            if at.year() > t.year() + 5 {
                return None;
            }
            if self.months & (1 << at.month()) == 0 {
                let (y, m) = if at.month() == 12 { (at.year() + 1, 1) } else { (at.year(), at.month() + 1) };
                at = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single()?;
                continue;
            }
            if !self.day_matches(at) {
                at = Utc.with_ymd_and_hms(at.year(), at.month(), at.day(), 0, 0, 0).single()? + Duration::days(1);
                continue;
            }
            if self.hours & (1 << at.hour()) == 0 {
                at = at.with_minute(0)? + Duration::hours(1);
                continue;
            }
            if self.minutes & (1 << at.minute()) == 0 {
                at += Duration::minutes(1);
                continue;
            }
            return Some(at);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn next_ticks() {
        let cases = [
            ("*/15 * * * *", at(2026, 11, 25, 14, 31), at(2026, 11, 25, 14, 45)),
            ("0 9 * * *", at(2026, 11, 25, 9, 0), at(2026, 11, 26, 9, 0)),
            ("0 9 * * MON-FRI", at(2026, 11, 27, 10, 0), at(2026, 11, 30, 9, 0)),
            ("30 2 1 * *", at(2026, 12, 15, 0, 0), at(2027, 1, 1, 2, 30)),
            ("0 0 29 2 *", at(2026, 3, 1, 0, 0), at(2028, 2, 29, 0, 0)),
            ("0 12 1 * 7", at(2026, 11, 25, 0, 0), at(2026, 11, 29, 12, 0)),
            ("@hourly", at(2026, 11, 25, 23, 59), at(2026, 11, 26, 0, 0)),
            ("0 0 1 JAN,jul *", at(2026, 2, 1, 0, 0), at(2026, 7, 1, 0, 0)),
        ];
        for (text, from, expected) in cases {
            let s = CronSchedule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.next_after(from), Some(expected), "{text} after {from}");
        }
        assert_eq!(CronSchedule::parse("0 0 31 2 *").unwrap().next_after(at(2026, 1, 1, 0, 0)), None);
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        for (text, says) in [
            ("* * *", "five fields"),
            ("61 * * * *", "minute field"),
            ("* 5-2 * * *", "backwards"),
            ("*/0 * * * *", "step of 0"),
            ("* * * FOO *", "month field"),
        ] {
            let err = CronSchedule::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
