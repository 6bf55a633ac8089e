//! ISO-8601 dates and timestamps as Debezium writes them (`ZonedTimestamp`, and date or
//! timestamp text in schemaless streams), without a calendar crate: only the proleptic
//! Gregorian day count is needed.

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Microseconds in a day.
const DAY_MICROS: i64 = 86_400_000_000;

/// Whether a timestamp of `micros` since 1970 lies within the years Arrow's readers
/// can show (chrono's calendar: −262144-01-01 to 262143-12-31). PostgreSQL's
/// `infinity` and `-infinity` arrive from Debezium as values near `i64`'s limits,
/// outside them; a reader shows such a value as an error, not a date.
pub fn timestamp_micros_in_range(micros: i64) -> bool {
    let first = days_from_civil(-262_144, 1, 1) * DAY_MICROS;
    let last = (days_from_civil(262_143, 12, 31) + 1) * DAY_MICROS - 1;
    (first..=last).contains(&micros)
}

/// The civil date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD` of a day count since 1970-01-01.
pub fn iso_date(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `HH:MM:SS[.fraction]` of nanoseconds since midnight, the fraction without
/// trailing zeros (as PostgreSQL writes times); hours past 23 are written as such.
pub fn iso_time_of_day(nanos: i64) -> String {
    let seconds = nanos.div_euclid(1_000_000_000);
    let fraction = nanos.rem_euclid(1_000_000_000);
    let mut text = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction != 0 {
        text.push_str(format!(".{fraction:09}").trim_end_matches('0'));
    }
    text
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction]` of nanoseconds since the epoch.
pub fn iso_timestamp(nanos: i64) -> String {
    const DAY: i64 = 86_400 * 1_000_000_000;
    format!("{}T{}", iso_date(nanos.div_euclid(DAY)), iso_time_of_day(nanos.rem_euclid(DAY)))
}

fn number(text: &str, what: &str, min: u32, max: u32) -> Result<u32, String> {
    let value: u32 = text.parse().map_err(|_| format!("{what} {text:?} is not a number"))?;
    if !(min..=max).contains(&value) || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {text:?} is out of range"));
    }
    Ok(value)
}

/// `YYYY-MM-DD` (a leading `-` or `+` on the year is allowed) to days since the epoch.
pub fn parse_date(text: &str) -> Result<i32, String> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut parts = rest.splitn(3, '-');
    let (Some(year), Some(month), Some(day)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("{text:?} is not a YYYY-MM-DD date"));
    };
    let year = number(year, "year", 0, 999_999)? as i64;
    let year = if negative { -year } else { year };
    let month = number(month, "month", 1, 12)?;
    let day = number(day, "day", 1, 31)?;
    i32::try_from(days_from_civil(year, month, day)).map_err(|_| format!("{text:?} is out of range"))
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM|±HHMM]` (a space may replace `T`; no
/// offset means UTC) to nanoseconds since the epoch.
pub fn parse_timestamp_nanos(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not an ISO-8601 timestamp");
    let split = text.find(['T', ' ']).ok_or_else(bad)?;
    let days = parse_date(&text[..split])? as i64;
    let rest = &text[split + 1..];
    let (clock, offset_seconds) = if let Some(clock) = rest.strip_suffix('Z') {
        (clock, 0i64)
    } else if let Some(at) = rest.rfind(['+', '-']) {
        let (clock, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let digits = offset[1..].replace(':', "");
        if digits.len() != 4 || !digits.is_ascii() {
            return Err(bad());
        }
        let hours = number(&digits[..2], "offset hours", 0, 18)? as i64;
        let minutes = number(&digits[2..], "offset minutes", 0, 59)? as i64;
        (clock, sign * (hours * 3600 + minutes * 60))
    } else {
        (rest, 0)
    };
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let seconds = number(h, "hour", 0, 23)? as i64 * 3600 + number(m, "minute", 0, 59)? as i64 * 60 + number(s, "second", 0, 60)? as i64;
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let nanos: i64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().map_err(|_| bad())? };
    let total = (days * 86_400 + seconds - offset_seconds).checked_mul(1_000_000_000).and_then(|n| n.checked_add(nanos));
    total.ok_or_else(|| format!("{text:?} is out of range"))
}

/// `HH:MM:SS[.fraction][Z|±HH:MM|±HHMM]` (Debezium's `ZonedTime`, PostgreSQL `timetz`)
/// to microseconds since midnight UTC. A fraction finer than microseconds must be
/// zeros there: it is refused rather than cut.
pub fn parse_zoned_time_micros(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not an ISO-8601 time of day");
    let (clock, offset_seconds) = split_offset(text).ok_or_else(bad)?;
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    // 24:00:00 is a valid PostgreSQL time.
    let seconds = number(h, "hour", 0, 24)? as i64 * 3600 + number(m, "minute", 0, 59)? as i64 * 60 + number(s, "second", 0, 60)? as i64;
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let nanos: i64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().map_err(|_| bad())? };
    if nanos % 1000 != 0 {
        return Err(format!("{text:?} is finer than microseconds"));
    }
    let day = 86_400i64 * 1_000_000;
    Ok(((seconds - offset_seconds) * 1_000_000 + nanos / 1000).rem_euclid(day))
}

/// Splits a trailing `Z` or `±HH:MM` / `±HHMM` / `±HH` offset off a time of day.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(clock) = text.strip_suffix('Z') {
        return Some((clock, 0));
    }
    let Some(at) = text.rfind(['+', '-']) else { return Some((text, 0)) };
    let (clock, offset) = text.split_at(at);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let digits = offset[1..].replace(':', "");
    let (hours, minutes) = match digits.len() {
        2 => (digits.as_str(), "00"),
        4 => digits.split_at(2),
        _ => return None,
    };
    let hours = number(hours, "offset hours", 0, 18).ok()? as i64;
    let minutes = number(minutes, "offset minutes", 0, 59).ok()? as i64;
    Some((clock, sign * (hours * 3600 + minutes * 60)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("2000-03-01"), Ok(11_017));
        assert_eq!(parse_date("1969-12-31"), Ok(-1));
        assert!(parse_date("2000-13-01").is_err());
        assert_eq!(parse_timestamp_nanos("1970-01-01T00:00:01Z"), Ok(1_000_000_000));
        assert_eq!(parse_timestamp_nanos("1970-01-01T02:00:00.000001+02:00"), Ok(1_000));
        assert_eq!(parse_timestamp_nanos("1970-01-01 00:00:00-0100"), Ok(3_600_000_000_000));
        assert_eq!(parse_timestamp_nanos("2021-06-15T12:30:45.123456789Z"), Ok(1_623_760_245_123_456_789));
        assert!(parse_timestamp_nanos("yesterday").is_err());
        assert!(parse_timestamp_nanos("2021-06-15T25:00:00Z").is_err());
    }

    #[test]
    fn dates_times_and_timestamps_written_back() {
        for days in [-719_528, -1, 0, 11_017, 19_783, 2_932_896] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
            assert_eq!(i64::from(parse_date(&iso_date(days)).expect("date")), days);
        }
        assert_eq!(iso_date(10_599), "1999-01-08");
        assert_eq!(iso_time_of_day(36_930_123_456_000), "10:15:30.123456");
        assert_eq!(iso_time_of_day(3_600_000_000_000), "01:00:00");
        assert_eq!(iso_timestamp(1_098_181_434_987_654_000), "2004-10-19T10:23:54.987654");
        assert_eq!(iso_timestamp(-1_000), "1969-12-31T23:59:59.999999");
        assert_eq!(parse_timestamp_nanos(&iso_timestamp(1_623_760_245_123_456_789)), Ok(1_623_760_245_123_456_789));
    }

    #[test]
    fn zoned_times_normalize_to_utc() {
        assert_eq!(parse_zoned_time_micros("10:15:30.123456Z"), Ok(36_930_123_456));
        assert_eq!(parse_zoned_time_micros("10:15:30+01:00"), Ok(33_330_000_000));
        assert_eq!(parse_zoned_time_micros("00:30:00+01"), Ok(84_600_000_000), "wraps to the previous day");
        assert_eq!(parse_zoned_time_micros("23:00:00-0200"), Ok(3_600_000_000));
        assert!(parse_zoned_time_micros("10:15:30.0000001Z").is_err(), "finer than µs");
        assert!(parse_zoned_time_micros("25:00:00Z").is_err());
        assert!(parse_zoned_time_micros("noon").is_err());
    }
}

/// Found writing the debezium_message fuzz target (which reproduces them).
#[cfg(test)]
mod fuzz_regressions {
    use super::*;

    /// A four-byte offset with a multi-byte character in it was sliced inside the
    /// character (a panic) instead of being refused.
    #[test]
    fn non_ascii_offsets_are_refused() {
        assert!(parse_timestamp_nanos("2021-06-15T12:30:45+0\u{e9}0").is_err());
        assert!(parse_timestamp_nanos("2021-06-15T12:30:45-\u{e9}\u{e9}").is_err());
        assert_eq!(parse_timestamp_nanos("1970-01-01T00:00:00+0000"), Ok(0));
    }
}
