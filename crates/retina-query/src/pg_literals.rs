//! Literal forms PostgreSQL reads and DataFusion refuses, spelled as DataFusion reads
//! them:
//!
//! - an interval written as a time, `'01:30:00'`, `'1:30'`, `'2 days 04:05:06.5'`:
//!   DataFusion reads only unit words (`1 hours 30 minutes`) (`pg_rewrite`);
//! - a timestamp without seconds, `'2024-01-01 10:00'`: Arrow's parser wants them;
//!   a date written with a time, `'2024-01-05 10:00'`, read as a date, and dates
//!   written `2024-1-5` or `20240105`; a zone written after a `timestamp`'s time,
//!   ignored (`pg_casts`);
//! - a number with an exponent, `1e20`, `1.5e3`: DataFusion reads it as a decimal of
//!   negative scale, which no result can carry (`SELECT 1e20` failed); it is written
//!   out (`1500.`) (`pg_rewrite`);
//! - a `SIMILAR TO` pattern, as the regular expression it means (`pg_rewrite`).
//!
//! Hand-written: fixed shapes, which no parsing crate in the tree reads as
//! PostgreSQL does.

/// Widest decimal DataFusion reads a literal into (Decimal256).
const WIDEST_DECIMAL_DIGITS: usize = 76;

/// How a number literal with an exponent is read.
#[derive(Debug, PartialEq)]
pub enum ExponentLiteral {
    /// A whole number, written out with a point: `1.5e3` is `1500.`, which
    /// DataFusion reads as numeric (bare `1500` would be a bigint, and `1.5e3 / 7`
    /// an integer division).
    Digits(String),
    /// More digits than any decimal holds (`1.5e300`, `1e-100`): a double precision.
    /// PostgreSQL's numeric holds them; Retina's holds 76 digits.
    Float,
}

/// What a number literal with an exponent (`1.5e3`) becomes; `None` for one
/// DataFusion reads as it is (no exponent, or a fraction within a decimal).
pub fn exponent_literal(text: &str) -> Option<ExponentLiteral> {
    let (mantissa, exponent) = text.split_once(['e', 'E'])?;
    let exponent: i64 = exponent.parse().ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = match digits.trim_start_matches('0') {
        "" => return Some(ExponentLiteral::Digits("0.".into())),
        significant => significant,
    };
    let Some(scale) = (fraction.len() as i64).checked_sub(exponent) else { return Some(ExponentLiteral::Float) };
    let zeros = usize::try_from(-scale).ok();
    match zeros {
        Some(zeros) if significant.len() + zeros <= WIDEST_DECIMAL_DIGITS => Some(ExponentLiteral::Digits(format!("{significant}{}.", "0".repeat(zeros)))),
        Some(_) => Some(ExponentLiteral::Float),
        None if significant.len().max(scale as usize) <= WIDEST_DECIMAL_DIGITS => None,
        None => Some(ExponentLiteral::Float),
    }
}

/// The regular expression a `SIMILAR TO` pattern means, as PostgreSQL translates
/// it (`similar_escape`): anchored at both ends, `%` any text, `_` any character,
/// `.`, `^`, `$` and `\` literal, groups not capturing, and a character after
/// `escape` taken literally. DataFusion took the pattern for a regular expression
/// as it stood, unanchored: `'abc' SIMILAR TO 'a%'` was false. `None` when the
/// pattern ends in the escape character (PostgreSQL refuses it; DataFusion's
/// reading is kept).
pub fn regex_of_similar_to(pattern: &str, escape: Option<char>) -> Option<String> {
    let mut regex = String::with_capacity(pattern.len() + 8);
    regex.push_str("^(?:");
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            let escaped = chars.next()?;
            if !escaped.is_alphanumeric() {
                regex.push('\\');
            }
            regex.push(escaped);
        } else if in_class {
            if c == '\\' || c == '[' {
                regex.push('\\');
            }
            regex.push(c);
            in_class = c != ']';
        } else {
            match c {
                '[' => {
                    regex.push('[');
                    // A `]` first (after an optional `^`) is one of the class's characters.
                    if chars.peek() == Some(&'^') {
                        regex.push('^');
                        chars.next();
                    }
                    if chars.peek() == Some(&']') {
                        regex.push_str("\\]");
                        chars.next();
                    }
                    in_class = true;
                }
                '%' => regex.push_str(".*"),
                '_' => regex.push('.'),
                '(' => regex.push_str("(?:"),
                '.' | '^' | '$' | '\\' => {
                    regex.push('\\');
                    regex.push(c);
                }
                other => regex.push(other),
            }
        }
    }
    regex.push_str(")$");
    Some(regex)
}

/// `text` as unit words when it is a time of day (with optional leading days):
/// `[N day[s]] [-]H:MM[:SS[.fraction]]`; `None` for any other text.
pub fn interval_from_time(text: &str) -> Option<String> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let (days, time) = match tokens.as_slice() {
        [time] => (None, *time),
        [days, unit, time] if unit.eq_ignore_ascii_case("day") || unit.eq_ignore_ascii_case("days") => {
            days.parse::<i64>().ok()?;
            (Some(*days), *time)
        }
        _ => return None,
    };
    let (sign, time) = match time.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", time.strip_prefix('+').unwrap_or(time)),
    };
    let parts: Vec<&str> = time.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let whole_seconds = seconds.split_once('.').map_or(seconds, |(whole, _)| whole);
    let fraction_ok = seconds.split_once('.').is_none_or(|(_, fraction)| digits(fraction));
    if !digits(hours) || !digits(minutes) || minutes.len() != 2 || !digits(whole_seconds) || !fraction_ok {
        return None;
    }
    let time = format!("{sign}{hours} hours {sign}{minutes} minutes {sign}{seconds} seconds");
    Some(match days {
        Some(days) => format!("{days} days {time}"),
        None => time,
    })
}

/// `text` with `:00` seconds when it is a date and a time of hours and minutes,
/// optionally followed by a zone (`+02`, `Z`, ` UTC`); `None` otherwise.
pub fn timestamp_with_seconds(text: &str) -> Option<String> {
    let rest = time_after_date(text)?;
    let hour_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=2).contains(&hour_len) || rest.as_bytes().get(hour_len) != Some(&b':') {
        return None;
    }
    let after_hour = &rest[hour_len + 1..];
    let minutes = after_hour.get(..2)?;
    if !minutes.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let zone = &after_hour[2..];
    let zone_ok = zone.is_empty() || zone.starts_with(['+', '-', 'Z', 'z', ' ']);
    if !zone_ok {
        return None; // seconds (`:SS`) or something else follows
    }
    let cut = text.len() - zone.len();
    Some(format!("{}:00{}", &text[..cut], zone))
}

/// `text` as a `timestamp` (without time zone) reads it in PostgreSQL: a zone after
/// the time (`+02`, `-05:30`, `Z`, ` UTC`) is ignored, where Arrow's parser moved the
/// time to UTC (`'2024-01-01 03:00+02'::timestamp` was 01:00), and missing seconds
/// are added; `None` when neither applies.
pub fn wall_clock_timestamp(text: &str) -> Option<String> {
    let rest = time_after_date(text)?;
    let time_len = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b':' || *b == b'.').count();
    let zone = &rest[time_len..];
    let offset = zone.trim_start();
    let is_zone = matches!(offset, "Z" | "z" | "UTC" | "GMT")
        || (offset.len() > 1 && offset.starts_with(['+', '-']) && offset[1..].bytes().all(|b| b.is_ascii_digit() || b == b':'));
    if zone.is_empty() || !is_zone {
        return timestamp_with_seconds(text);
    }
    let wall = &text[..text.len() - zone.len()];
    Some(timestamp_with_seconds(wall).unwrap_or_else(|| wall.to_string()))
}

/// The date of `text` when it is a date followed by a time (`2024-01-05 10:00`,
/// `2024-01-05T10:00:00Z`), as PostgreSQL reads such text as a date; `None` otherwise.
pub fn date_of_timestamp(text: &str) -> Option<String> {
    let time = time_after_date(text)?;
    time.starts_with(|c: char| c.is_ascii_digit()).then(|| text[..10].to_string())
}

/// `text` as PostgreSQL reads it as a date, where Arrow's parser wants `YYYY-MM-DD`
/// alone: a date with a time is read by its date ([`date_of_timestamp`]), a month or
/// day of one digit is padded (`2024-1-5`), and `YYYYMMDD` is split; `None` for text
/// that needs none of these.
pub fn postgres_date(text: &str) -> Option<String> {
    if let Some(date) = date_of_timestamp(text) {
        return Some(date);
    }
    let text = text.trim();
    if text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(format!("{}-{}-{}", &text[..4], &text[4..6], &text[6..]));
    }
    let parts: Vec<&str> = text.split('-').collect();
    let [year, month, day] = parts.as_slice() else { return None };
    let digits = |part: &str, most: usize| (1..=most).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    if year.len() != 4 || !digits(year, 4) || !digits(month, 2) || !digits(day, 2) || (month.len() == 2 && day.len() == 2) {
        return None;
    }
    Some(format!("{year}-{month:0>2}-{day:0>2}"))
}

/// What follows `YYYY-MM-DD` and a space or `T` at the start of `text`.
fn time_after_date(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let dated = bytes.len() > 11
        && bytes[..10].iter().enumerate().all(|(i, b)| if i == 4 || i == 7 { *b == b'-' } else { b.is_ascii_digit() })
        && matches!(bytes[10], b' ' | b'T');
    // The first 11 bytes are ASCII, so byte 11 starts a character.
    dated.then(|| &text[11..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pattern matched against texts as PostgreSQL 15 matches them.
    #[test]
    fn similar_to_patterns_mean_what_they_mean_in_postgresql() {
        let matches = |text: &str, pattern: &str| {
            let regex = regex_of_similar_to(pattern, Some('\\')).expect("a pattern");
            regex::Regex::new(&regex).expect("a regex").is_match(text)
        };
        assert!(matches("abc", "a%"));
        assert!(!matches("abc", "(a|b)c"));
        assert!(matches("bc", "(a|b)c"));
        assert!(matches("a.c", "a.c") && !matches("abc", "a.c"));
        assert!(matches("abc", "%b%") && !matches("abc", "b%"));
        assert!(matches("a_c", "a\\_c") && !matches("abc", "a\\_c"));
        assert!(matches("ab", "[a-c]b") && matches("]b", "[]x]b") && !matches("xb", "[^a-z]b"));
        assert!(matches("aaa", "a{2,3}") && !matches("aaaa", "a{2,3}"));
        assert!(matches("$^", "$^"));
        assert_eq!(regex_of_similar_to("a\\", Some('\\')), None, "a trailing escape");
        assert_eq!(regex_of_similar_to("a#%", Some('#')), Some("^(?:a\\%)$".into()));
    }

    #[test]
    fn a_timestamp_without_zone_ignores_the_zone_written() {
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00:00+02").as_deref(), Some("2024-01-01 03:00:00"));
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00-05:30").as_deref(), Some("2024-01-01 03:00:00"));
        assert_eq!(wall_clock_timestamp("2024-01-01T03:00:00.5Z").as_deref(), Some("2024-01-01T03:00:00.5"));
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00 UTC").as_deref(), Some("2024-01-01 03:00:00"));
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00").as_deref(), Some("2024-01-01 03:00:00"), "seconds only");
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00:00"), None, "nothing to change");
        assert_eq!(wall_clock_timestamp("2024-01-01 03:00:00 Europe/Paris"), None, "a named zone is left to Arrow");
    }

    #[test]
    fn numbers_with_exponents_are_written_out_or_read_as_floats() {
        let digits = |text: &str| Some(ExponentLiteral::Digits(text.into()));
        assert_eq!(exponent_literal("1e20"), digits("100000000000000000000."));
        assert_eq!(exponent_literal("1.5e3"), digits("1500."));
        assert_eq!(exponent_literal("1E2"), digits("100."));
        assert_eq!(exponent_literal("15e-1"), None, "a fraction DataFusion reads as a decimal");
        assert_eq!(exponent_literal("2e-3"), None);
        assert_eq!(exponent_literal("0e5"), digits("0."));
        assert_eq!(exponent_literal("1.5e300"), Some(ExponentLiteral::Float));
        assert_eq!(exponent_literal("1e-100"), Some(ExponentLiteral::Float));
        assert_eq!(exponent_literal("1e-9223372036854775808"), Some(ExponentLiteral::Float));
        assert_eq!(exponent_literal("12.5"), None, "no exponent");
        assert_eq!(exponent_literal("1e2x"), None, "not a number");
    }

    #[test]
    fn times_become_unit_words() {
        assert_eq!(interval_from_time("01:30:00").as_deref(), Some("01 hours 30 minutes 00 seconds"));
        assert_eq!(interval_from_time("1:30").as_deref(), Some("1 hours 30 minutes 0 seconds"));
        assert_eq!(interval_from_time("-00:00:01.5").as_deref(), Some("-00 hours -00 minutes -01.5 seconds"));
        assert_eq!(interval_from_time("2 days 04:05:06").as_deref(), Some("2 days 04 hours 05 minutes 06 seconds"));
        for other in ["1 hour", "10", "1:2", "a:30", "01:30:00:00", "1 week 01:00", "01:30:x", "", "1.5:30"] {
            assert_eq!(interval_from_time(other), None, "{other}");
        }
    }

    #[test]
    fn dates_read_as_postgresql_reads_them() {
        assert_eq!(postgres_date("2024-1-5").as_deref(), Some("2024-01-05"));
        assert_eq!(postgres_date("2024-12-5").as_deref(), Some("2024-12-05"));
        assert_eq!(postgres_date("20240105").as_deref(), Some("2024-01-05"));
        assert_eq!(postgres_date("2024-01-05 10:00").as_deref(), Some("2024-01-05"));
        for unchanged in ["2024-01-05", "24-1-5", "2024-1", "2024-x-5", "Jan 5 2024", "2024-123-5"] {
            assert_eq!(postgres_date(unchanged), None, "{unchanged}");
        }
    }

    #[test]
    fn timestamps_without_seconds_get_them() {
        assert_eq!(timestamp_with_seconds("2024-01-01 10:00").as_deref(), Some("2024-01-01 10:00:00"));
        assert_eq!(timestamp_with_seconds("2024-01-01T9:05").as_deref(), Some("2024-01-01T9:05:00"));
        assert_eq!(timestamp_with_seconds("2024-01-01 10:00+02").as_deref(), Some("2024-01-01 10:00:00+02"));
        assert_eq!(timestamp_with_seconds("2024-01-01 10:00 UTC").as_deref(), Some("2024-01-01 10:00:00 UTC"));
        assert_eq!(date_of_timestamp("2024-01-05 10:00").as_deref(), Some("2024-01-05"));
        assert_eq!(date_of_timestamp("2024-01-05T10:00:00Z").as_deref(), Some("2024-01-05"));
        for other in ["2024-01-05", "2024-01-05 ", "2024-01-05 x", "2024/01/05 10:00", "05-01-2024 10:00"] {
            assert_eq!(date_of_timestamp(other), None, "{other}");
        }
        for other in ["2024-01-01 10:00:00", "2024-01-01", "2024-01-01 10", "2024-1-01 10:00", "2024-01-01 10:0", "x024-01-01 10:00", "2024-01-01 10:00.5"] {
            assert_eq!(timestamp_with_seconds(other), None, "{other}");
        }
    }
}
