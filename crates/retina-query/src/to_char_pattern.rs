//! PostgreSQL's `to_char` date/time patterns (`YYYY-MM-DD HH24:MI:SS`) as the chrono
//! patterns DataFusion's `to_char` takes (`%Y-%m-%d %H:%M:%S`).
//!
//! DataFusion copies a pattern without `%` to its output unchanged, so
//! `to_char(d, 'YYYY-MM')` answered the text `YYYY-MM` for every row, and a `GROUP BY`
//! on it put every row in one group. Only the common tokens are translated, each to
//! what PostgreSQL prints; a pattern with any other letters (`Q`, `WW`, `Month`
//! padded to nine characters, `MON` in capitals …) is left as it is, and so is a
//! pattern that already has `%` (written for DataFusion). No crate translates these
//! patterns; the table is small.

/// The chrono pattern for PostgreSQL pattern `pattern`, or `None` when it has a
/// token not translated here (or is a chrono pattern already).
pub(crate) fn chrono_pattern(pattern: &str) -> Option<String> {
    if pattern.contains('%') {
        return None;
    }
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut rest = pattern;
    while !rest.is_empty() {
        // Text in double quotes is copied as it is.
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"')?;
            out.push_str(&quoted[..end]);
            rest = &quoted[end + 1..];
            continue;
        }
        let (fill, token) = match rest.strip_prefix("FM") {
            Some(after) => (true, after),
            None => (false, rest),
        };
        match TOKENS.iter().find(|(name, ..)| token.starts_with(name)) {
            Some((name, padded, unpadded)) => {
                let chrono = if fill { unpadded } else { padded };
                if chrono.is_empty() {
                    return None; // PostgreSQL pads it; chrono cannot
                }
                out.push_str(chrono);
                rest = &token[name.len()..];
            }
            None => {
                let c = rest.chars().next()?;
                if c.is_ascii_alphabetic() || fill {
                    return None;
                }
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Some(out)
}

/// PostgreSQL token, chrono for it, and chrono for it in fill mode (`FM`: no
/// padding). Longer tokens first, so `DDD` is not read as `DD` and `HH24` not as
/// `HH`.
const TOKENS: [(&str, &str, &str); 19] = [
    ("YYYY", "%Y", "%Y"),
    ("HH24", "%H", "%-H"),
    ("HH12", "%I", "%-I"),
    ("Month", "", "%B"),
    ("Day", "", "%A"),
    ("DDD", "%j", "%-j"),
    ("YY", "%y", "%y"),
    ("MM", "%m", "%-m"),
    ("DD", "%d", "%-d"),
    ("HH", "%I", "%-I"),
    ("MI", "%M", "%-M"),
    ("SS", "%S", "%-S"),
    ("MS", "%3f", "%3f"),
    ("US", "%6f", "%6f"),
    ("AM", "%p", "%p"),
    ("PM", "%p", "%p"),
    ("am", "%P", "%P"),
    ("pm", "%P", "%P"),
    ("Mon", "%b", "%b"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_patterns_translate_to_what_postgresql_prints() {
        assert_eq!(chrono_pattern("YYYY-MM-DD HH24:MI:SS").as_deref(), Some("%Y-%m-%d %H:%M:%S"));
        assert_eq!(chrono_pattern("YYYY-MM").as_deref(), Some("%Y-%m"));
        assert_eq!(chrono_pattern("DD/MM/YY HH12:MI AM").as_deref(), Some("%d/%m/%y %I:%M %p"));
        assert_eq!(chrono_pattern("FMDD FMMonth YYYY").as_deref(), Some("%-d %B %Y"));
        assert_eq!(chrono_pattern("Dy, DD Mon YYYY").as_deref(), None, "Dy is not translated");
        assert_eq!(chrono_pattern("HH24:MI:SS.MS").as_deref(), Some("%H:%M:%S.%3f"));
        assert_eq!(chrono_pattern("YYYY\"T\"HH24").as_deref(), Some("%YT%H"));
        assert_eq!(chrono_pattern("DDD").as_deref(), Some("%j"));
    }

    #[test]
    fn patterns_with_other_tokens_or_chrono_ones_are_left_alone() {
        assert_eq!(chrono_pattern("YYYY-Q"), None);
        assert_eq!(chrono_pattern("Month"), None, "padded to nine characters in PostgreSQL");
        assert_eq!(chrono_pattern("MON"), None);
        assert_eq!(chrono_pattern("%Y-%m"), None);
        assert_eq!(chrono_pattern("YYYY\"unclosed"), None);
        assert_eq!(chrono_pattern("FM-"), None);
    }
}
