//! Dates and times in PostgreSQL's ISO output (`DateStyle = ISO`, `TimeZone = UTC`):
//! `2024-01-02`, `03:04:05.123456`, `2024-01-02 03:04:05.123456+00`, ` BC` suffixes,
//! years beyond 9999, and `infinity` / `-infinity`.

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Days since 1970-01-01 of a proleptic Gregorian date (astronomical year numbering).
pub(super) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn number(text: &str, what: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad {what} '{text}'"));
    }
    text.parse().map_err(|_| format!("bad {what} '{text}'"))
}

/// Splits a trailing ` BC` off.
fn era(text: &str) -> (&str, bool) {
    match text.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (text, false),
    }
}

/// `YYYY-MM-DD` (year may have more digits) to days since the epoch.
fn date_days(text: &str, before_christ: bool) -> Result<i64, String> {
    let mut parts = text.splitn(3, '-');
    let (Some(year), Some(month), Some(day)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("expected YYYY-MM-DD, got '{text}'"));
    };
    let year = i64::from(number(year, "year")?);
    let month = number(month, "month")?;
    let day = number(day, "day")?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(format!("date out of range '{text}'"));
    }
    // 1 BC is astronomical year 0.
    let year = if before_christ { 1 - year } else { year };
    Ok(days_from_civil(year, month, day))
}

/// A date as days since 1970-01-01.
pub(super) fn parse_date(text: &str) -> Result<i32, String> {
    match text {
        "infinity" => return Ok(i32::MAX),
        "-infinity" => return Ok(i32::MIN),
        _ => {}
    }
    let (text, bc) = era(text);
    let days = date_days(text, bc)?;
    i32::try_from(days).map_err(|_| format!("date out of range '{text}'"))
}

/// `HH:MM:SS[.ffffff]` to microseconds since midnight (24:00:00 is allowed).
pub(super) fn parse_time(text: &str) -> Result<i64, String> {
    let mut parts = text.splitn(3, ':');
    let (Some(hours), Some(minutes), Some(seconds)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("expected HH:MM:SS, got '{text}'"));
    };
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let hours = i64::from(number(hours, "hour")?);
    let minutes = i64::from(number(minutes, "minute")?);
    let whole = i64::from(number(whole, "second")?);
    if hours > 24 || minutes > 59 || whole > 60 || fraction.len() > 6 {
        return Err(format!("time out of range '{text}'"));
    }
    let mut micros = 0i64;
    if !fraction.is_empty() {
        micros = i64::from(number(fraction, "fraction")?) * 10i64.pow(6 - fraction.len() as u32);
    }
    Ok(((hours * 60 + minutes) * 60 + whole) * MICROS_PER_SECOND + micros)
}

/// `±HH[:MM[:SS]]` to seconds east of UTC.
fn offset_seconds(text: &str) -> Result<i64, String> {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'+') => (1, &text[1..]),
        Some(b'-') => (-1, &text[1..]),
        _ => return Err(format!("bad time zone offset '{text}'")),
    };
    let mut seconds = 0i64;
    for (i, part) in rest.split(':').enumerate() {
        if i > 2 {
            return Err(format!("bad time zone offset '{text}'"));
        }
        seconds += i64::from(number(part, "offset")?) * [3600, 60, 1][i];
    }
    Ok(sign * seconds)
}

/// A timestamp as microseconds since the Unix epoch; with `with_zone`, the text ends
/// in a UTC offset that is applied.
pub(super) fn parse_timestamp(text: &str, with_zone: bool) -> Result<i64, String> {
    match text {
        "infinity" => return Ok(i64::MAX),
        "-infinity" => return Ok(i64::MIN),
        _ => {}
    }
    let (text, bc) = era(text);
    let (date, time) = text.split_once(' ').ok_or_else(|| format!("expected 'date time', got '{text}'"))?;
    let (time, offset) = if with_zone {
        let at = time.find(['+', '-']).ok_or_else(|| format!("missing UTC offset in '{text}'"))?;
        (&time[..at], offset_seconds(&time[at..])?)
    } else {
        (time, 0)
    };
    let days = date_days(date, bc)?;
    let micros = parse_time(time)?;
    days.checked_mul(MICROS_PER_DAY)
        .and_then(|d| d.checked_add(micros))
        .and_then(|t| t.checked_sub(offset.checked_mul(MICROS_PER_SECOND)?))
        .ok_or_else(|| format!("timestamp out of range '{text}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("2000-03-01"), Ok(11_017));
        assert_eq!(parse_date("1969-12-31"), Ok(-1));
        assert_eq!(parse_date("0001-01-01"), Ok(-719_162));
        assert_eq!(parse_date("0001-12-31 BC"), Ok(-719_163), "1 BC is year 0");
        assert_eq!(parse_date("infinity"), Ok(i32::MAX));
        assert!(parse_date("2024-13-01").is_err());
        assert!(parse_date("yesterday").is_err());
    }

    #[test]
    fn times_and_timestamps() {
        assert_eq!(parse_time("00:00:00"), Ok(0));
        assert_eq!(parse_time("03:04:05.5"), Ok(((3 * 60 + 4) * 60 + 5) * 1_000_000 + 500_000));
        assert_eq!(parse_time("24:00:00"), Ok(86_400_000_000));
        assert!(parse_time("03:04").is_err());
        assert!(parse_time("03:04:05.1234567").is_err());
        assert_eq!(parse_timestamp("1970-01-02 00:00:01", false), Ok(86_401_000_000));
        assert_eq!(parse_timestamp("1970-01-01 01:00:00+01", true), Ok(0));
        assert_eq!(parse_timestamp("1970-01-01 00:00:00-05:30", true), Ok(19_800_000_000));
        assert_eq!(parse_timestamp("2024-02-29 12:00:00.000001+00", true), Ok(1_709_208_000_000_001));
        assert_eq!(parse_timestamp("-infinity", true), Ok(i64::MIN));
        assert!(parse_timestamp("2024-02-29 12:00:00", true).is_err(), "missing offset");
        assert!(parse_timestamp("2024-02-29", false).is_err());
    }

    /// Found writing the pgoutput_message fuzz target (which reproduces it): an offset
    /// of billions of hours overflowed (a panic with overflow checks) instead of being
    /// out of range.
    #[test]
    fn huge_offsets_are_out_of_range() {
        assert!(parse_timestamp("1970-01-01 00:00:00+4294967295", true).unwrap_err().contains("out of range"));
        assert!(parse_timestamp("1970-01-01 00:00:00-4294967295:59:59", true).is_err());
    }
}
