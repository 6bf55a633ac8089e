//! `float4` and `float8` values in text as PostgreSQL writes them (`float4out`,
//! `float8out`). pgwire writes Rust's forms: `2.0` for 2, `1e20`, `0.00001`, `inf`
//! and `0` for -0. psql showed them, and JDBC's `getDouble` refuses `inf`.
//!
//! - With `extra_float_digits` above 0 (PostgreSQL's default, 1): the shortest
//!   digits that read back as the same value, laid out fixed while the decimal
//!   exponent is at least -4 and below 15 (float8) or 6 (float4), else as `1e+20`.
//! - At 0 or below: `printf`'s `%.Ng` with N = 15 (float8) or 6 (float4) plus
//!   `extra_float_digits`.
//!
//! Written here, not taken from a crate: the digits are Rust's own (`{:e}` is the
//! shortest round-trip form, `{:.Ne}` rounds exactly); only PostgreSQL's layout of
//! them is ours.

/// Significant digits of `%g` at `extra_float_digits` 0: C's `DBL_DIG` and `FLT_DIG`.
const FLOAT8_DIGITS: i32 = 15;
const FLOAT4_DIGITS: i32 = 6;

/// `value` as `float8out` writes it.
pub fn float8_text(value: f64, extra_float_digits: i8) -> String {
    match special(value.is_nan(), value.is_infinite(), value.is_sign_negative()) {
        Some(text) => text.to_string(),
        None if extra_float_digits > 0 => shortest(&format!("{value:e}"), FLOAT8_DIGITS),
        None => general(|digits| format!("{value:.digits$e}"), FLOAT8_DIGITS + i32::from(extra_float_digits)),
    }
}

/// `value` as `float4out` writes it.
pub fn float4_text(value: f32, extra_float_digits: i8) -> String {
    match special(value.is_nan(), value.is_infinite(), value.is_sign_negative()) {
        Some(text) => text.to_string(),
        None if extra_float_digits > 0 => shortest(&format!("{value:e}"), FLOAT4_DIGITS),
        None => general(|digits| format!("{value:.digits$e}"), FLOAT4_DIGITS + i32::from(extra_float_digits)),
    }
}

fn special(nan: bool, infinite: bool, negative: bool) -> Option<&'static str> {
    match (nan, infinite, negative) {
        (true, _, _) => Some("NaN"),
        (false, true, false) => Some("Infinity"),
        (false, true, true) => Some("-Infinity"),
        _ => None,
    }
}

/// A number in Rust's exponent form (`-1.25e-3`): its sign, its digits without the
/// point, and the decimal exponent of the first digit.
fn parts(scientific: &str) -> (bool, String, i32) {
    let (negative, unsigned) = match scientific.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, scientific),
    };
    let (mantissa, exponent) = unsigned.split_once('e').unwrap_or((unsigned, "0"));
    (negative, mantissa.replace('.', ""), exponent.parse().unwrap_or(0))
}

/// PostgreSQL's layout of the shortest digits (`float8out` through `d2s.c`).
fn shortest(scientific: &str, fixed_below: i32) -> String {
    let (negative, digits, exponent) = parts(scientific);
    let sign = if negative { "-" } else { "" };
    if (-4..fixed_below).contains(&exponent) {
        format!("{sign}{}", fixed(&digits, exponent))
    } else {
        format!("{sign}{}", exponential(&digits, exponent))
    }
}

/// `digits` with the first at decimal exponent `exponent`, without an exponent.
fn fixed(digits: &str, exponent: i32) -> String {
    if exponent < 0 {
        return format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize));
    }
    let whole = exponent as usize + 1;
    if digits.len() <= whole {
        format!("{digits}{}", "0".repeat(whole - digits.len()))
    } else {
        format!("{}.{}", &digits[..whole], &digits[whole..])
    }
}

/// `d.ddde+XX`: C's exponent form, with at least two exponent digits.
fn exponential(digits: &str, exponent: i32) -> String {
    let (first, rest) = digits.split_at(1.min(digits.len()));
    let point = if rest.is_empty() { String::new() } else { format!(".{rest}") };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{first}{point}e{sign}{:02}", exponent.unsigned_abs())
}

/// C's `%.{precision}g`: `precision` significant digits, trailing zeros dropped,
/// in exponent form when the exponent is below -4 or at least `precision`.
/// `rounded(n)` is the value in Rust's exponent form with `n` digits after the point.
fn general(rounded: impl Fn(usize) -> String, precision: i32) -> String {
    let precision = precision.max(1);
    let (negative, digits, exponent) = parts(&rounded(precision as usize - 1));
    let sign = if negative { "-" } else { "" };
    let digits = match digits.trim_end_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    if exponent < -4 || exponent >= precision {
        format!("{sign}{}", exponential(digits, exponent))
    } else {
        format!("{sign}{}", fixed(digits, exponent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value as PostgreSQL 15 printed it (`SELECT v::text`, then with
    /// `SET extra_float_digits` 0 and -3).
    #[test]
    fn float8_reads_as_postgresql_writes_it() {
        let shortest: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (2.0 / 3.0, "0.6666666666666666"),
            (1e14, "100000000000000"),
            (1e15, "1e+15"),
            (123456789012345.6, "123456789012345.6"),
            (1e-4, "0.0001"),
            (1.5e-4, "0.00015"),
            (9.99e-5, "9.99e-05"),
            (1e20, "1e+20"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (100.0, "100"),
            (123.456, "123.456"),
            (-1e-7, "-1e-07"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for &(value, want) in shortest {
            assert_eq!(float8_text(value, 1), want, "{value:e}");
        }
        let at_zero: &[(f64, &str)] = &[
            (0.1, "0.1"),
            (1.0 / 3.0, "0.333333333333333"),
            (1e15, "1e+15"),
            (1e14, "100000000000000"),
            (123456789012345.6, "123456789012346"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (2.5, "2.5"),
            (1e20, "1e+20"),
            (100.0, "100"),
        ];
        for &(value, want) in at_zero {
            assert_eq!(float8_text(value, 0), want, "{value:e}");
        }
        let at_minus_three: &[(f64, &str)] = &[
            (1.0 / 3.0, "0.333333333333"),
            (1e12, "1e+12"),
            (123456789012.6, "123456789013"),
            (999999999999.9, "1e+12"),
            (2.5, "2.5"),
        ];
        for &(value, want) in at_minus_three {
            assert_eq!(float8_text(value, -3), want, "{value:e}");
        }
    }

    #[test]
    fn float4_reads_as_postgresql_writes_it() {
        let shortest: &[(f32, &str)] = &[
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (999999.0, "999999"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (16777217.0, "1.6777216e+07"),
            (3.4e38, "3.4e+38"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.33333334"),
            (1e-45, "1e-45"),
            (100000.0, "100000"),
        ];
        for &(value, want) in shortest {
            assert_eq!(float4_text(value, 1), want, "{value:e}");
        }
        let at_zero: &[(f32, &str)] =
            &[(123456.0, "123456"), (1234567.0, "1.23457e+06"), (0.1, "0.1"), (1.0 / 3.0, "0.333333"), (16777217.0, "1.67772e+07")];
        for &(value, want) in at_zero {
            assert_eq!(float4_text(value, 0), want, "{value:e}");
        }
    }
}
