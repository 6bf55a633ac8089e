//! Timestamps and times in text as PostgreSQL writes them (ISO `DateStyle`): the
//! seconds' fraction only when there is one, without trailing zeros (`10:00:00`,
//! `10:00:00.5`), where pgwire writes six digits always (`10:00:00.000000`); a
//! timestamptz in the session's zone, UTC, as `+00`; a year before 1 as `BC`. And
//! a duration (the difference of two timestamps) as PostgreSQL's interval of whole
//! days and a time (`2 days 03:00:00`), where pgwire writes hours only (`51:00:00`).

use chrono::{Datelike, NaiveDateTime, NaiveTime, Timelike};

/// A `timestamp`, or with `with_zone` a `timestamptz` (`datetime` in UTC).
pub fn timestamp_text(datetime: NaiveDateTime, with_zone: bool) -> String {
    let year = datetime.year();
    let (shown_year, era) = if year > 0 { (year, "") } else { (1 - year, " BC") };
    let zone = if with_zone { "+00" } else { "" };
    format!(
        "{shown_year:04}-{:02}-{:02} {}{zone}{era}",
        datetime.month(),
        datetime.day(),
        time_text(datetime.time())
    )
}

/// A `time`: microseconds at most, as PostgreSQL keeps.
pub fn time_text(time: NaiveTime) -> String {
    let micros = time.nanosecond() / 1_000 % 1_000_000; // a leap second's 1e9+ folds in
    let fraction = match micros {
        0 => String::new(),
        _ => format!(".{micros:06}").trim_end_matches('0').to_string(),
    };
    format!("{:02}:{:02}:{:02}{fraction}", time.hour(), time.minute(), time.second())
}

/// A duration of `nanos` nanoseconds as PostgreSQL writes the interval a timestamp
/// difference gives (`timestamp_mi` justifies hours into days): microseconds at most.
pub fn duration_text(nanos: i128) -> String {
    const NANOS_PER_DAY: u128 = 86_400_000_000_000;
    let sign = if nanos < 0 { "-" } else { "" };
    let length = nanos.unsigned_abs();
    let (days, micros) = (length / NANOS_PER_DAY, length % NANOS_PER_DAY / 1_000);
    let mut parts = Vec::with_capacity(2);
    if days > 0 {
        parts.push(format!("{sign}{days} {}", if days == 1 { "day" } else { "days" }));
    }
    if micros > 0 || days == 0 {
        let seconds = micros / 1_000_000;
        let fraction = match micros % 1_000_000 {
            0 => String::new(),
            fraction => format!(".{fraction:06}").trim_end_matches('0').to_string(),
        };
        parts.push(format!("{sign}{:02}:{:02}:{:02}{fraction}", seconds / 3600, seconds / 60 % 60, seconds % 60));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn at(y: i32, m: u32, d: u32, h: u32, min: u32, s: u32, micros: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, m, d).and_then(|date| date.and_hms_micro_opt(h, min, s, micros)).expect("valid")
    }

    /// As PostgreSQL 15 writes them with `TimeZone` UTC.
    #[test]
    fn timestamps_and_times_read_as_postgresql_writes_them() {
        assert_eq!(timestamp_text(at(2024, 1, 1, 3, 0, 0, 0), false), "2024-01-01 03:00:00");
        assert_eq!(timestamp_text(at(2024, 1, 1, 0, 0, 0, 500_000), true), "2024-01-01 00:00:00.5+00");
        assert_eq!(timestamp_text(at(2024, 5, 7, 8, 9, 5, 123_456), false), "2024-05-07 08:09:05.123456");
        assert_eq!(timestamp_text(at(2024, 5, 7, 8, 9, 5, 120), true), "2024-05-07 08:09:05.00012+00");
        assert_eq!(timestamp_text(at(0, 1, 1, 0, 0, 0, 0), false), "0001-01-01 00:00:00 BC");
        assert_eq!(timestamp_text(at(99, 12, 31, 23, 59, 59, 0), false), "0099-12-31 23:59:59");
        let time = |h, m, s, micros| NaiveTime::from_hms_micro_opt(h, m, s, micros).expect("valid");
        assert_eq!(time_text(time(10, 0, 0, 0)), "10:00:00");
        assert_eq!(time_text(time(10, 0, 0, 123_400)), "10:00:00.1234");
    }

    /// Timestamp differences as PostgreSQL 15 writes them.
    #[test]
    fn durations_read_as_postgresql_writes_a_timestamp_difference() {
        let (second, hour, day) = (1_000_000_000i128, 3_600_000_000_000i128, 86_400_000_000_000i128);
        assert_eq!(duration_text(2 * day + 3 * hour), "2 days 03:00:00");
        assert_eq!(duration_text(2 * day), "2 days");
        assert_eq!(duration_text(-(2 * day + 3 * hour)), "-2 days -03:00:00");
        assert_eq!(duration_text(second / 2), "00:00:00.5");
        assert_eq!(duration_text(5 * hour), "05:00:00");
        assert_eq!(duration_text(0), "00:00:00");
        assert_eq!(duration_text(-(second + second / 4)), "-00:00:01.25");
        assert_eq!(duration_text(day - second), "23:59:59");
        assert_eq!(duration_text(day + 1), "1 day");
    }
}
