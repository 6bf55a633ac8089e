//! The initial copy: every published table's rows as of the slot's exported snapshot,
//! read with `COPY ... TO STDOUT` (text format) by parallel workers, each on its own
//! connection inside that snapshot, and submitted as mirror transactions of
//! [`COPY_CHUNK_ROWS`] rows. Streaming then starts at the slot's consistent point,
//! which is exactly where the snapshot ends: no gap, no duplicate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use retina_core::{Engine, RowChange};

use crate::conninfo::PgSourceOptions;
use crate::error::{PgSourceError, PgSourceResult};
use crate::relation::BoundRelation;
use crate::setup::{catalog_connection, quote_identifier, quote_literal};

/// Rows per mirror transaction of the copy.
pub const COPY_CHUNK_ROWS: usize = 8192;

/// The position text of copy transactions: a restart that finds it redoes the copy.
pub const COPY_POSITION: &str = "copy";

/// What the copy did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CopyReport {
    pub tables: usize,
    pub rows: u64,
    pub elapsed: Duration,
    /// Tables whose copy failed on an error of their own, with it, when the source
    /// pauses such tables (their copied rows are taken back; the others are copied).
    pub paused: Vec<(String, String)>,
}

/// Splits one line of COPY text format into fields, unescaping into `scratch`.
/// Returns `(start, end)` ranges into `scratch` (or `None` for `\N`).
pub(crate) fn split_copy_line(line: &[u8], scratch: &mut Vec<u8>, fields: &mut Vec<Option<(usize, usize)>>) -> Result<(), String> {
    scratch.clear();
    fields.clear();
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut start = 0;
    let mut i = 0;
    let mut null = false;
    loop {
        let end_of_field = i == line.len() || line[i] == b'\t';
        if end_of_field {
            fields.push(if null { None } else { Some((start, scratch.len())) });
            if i == line.len() {
                return Ok(());
            }
            i += 1;
            start = scratch.len();
            null = false;
            continue;
        }
        let byte = line[i];
        if byte != b'\\' {
            scratch.push(byte);
            i += 1;
            continue;
        }
        let Some(&next) = line.get(i + 1) else { return Err("line ends in a lone backslash".into()) };
        i += 2;
        match next {
            b'N' if scratch.len() == start && (i == line.len() || line[i] == b'\t') => null = true,
            b'b' => scratch.push(8),
            b'f' => scratch.push(12),
            b'n' => scratch.push(b'\n'),
            b'r' => scratch.push(b'\r'),
            b't' => scratch.push(b'\t'),
            b'v' => scratch.push(11),
            b'0'..=b'7' => {
                let mut value = u32::from(next - b'0');
                for _ in 0..2 {
                    match line.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                scratch.push(value as u8);
            }
            b'x' => {
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match line.get(i).and_then(|d| char::from(*d).to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            i += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    scratch.extend_from_slice(b"x");
                } else {
                    scratch.push(value as u8);
                }
            }
            other => scratch.push(other),
        }
    }
}

/// A table to copy: bound to its Retina table, with the publication's row filter.
pub struct CopyTable {
    pub relation: BoundRelation,
    /// Only rows it holds are published, so only they are copied.
    pub row_filter: Option<String>,
    /// A partitioned table (published through its root): `COPY` reads it only
    /// through a query.
    pub partitioned: bool,
}

/// Copies `relations` (already bound to their Retina tables) inside `snapshot_name`;
/// every chunk is a mirror transaction recording `position`. With
/// `pause_failing`, a table's own error (a value the mirror cannot
/// hold) leaves that table out ([`CopyReport::paused`]) and the copy goes on.
pub fn copy_tables(
    engine: &Engine,
    options: &PgSourceOptions,
    source: &str,
    snapshot_name: &str,
    relations: &[CopyTable],
    copied_rows: &AtomicU64,
    position: &str,
    pause_failing: bool,
) -> PgSourceResult<CopyReport> {
    let started = Instant::now();
    let queue = Mutex::new(relations.iter().collect::<Vec<_>>());
    let paused = Mutex::new(Vec::new());
    let workers = options.copy_workers.min(relations.len()).max(1);
    let results: Vec<PgSourceResult<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> PgSourceResult<()> {
                    let mut connection = catalog_connection(options)?;
                    connection.simple_query(&format!(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
                        quote_literal(snapshot_name)
                    ))?;
                    loop {
                        let next = queue.lock().map_err(|_| PgSourceError::Setup("a copy worker panicked".into()))?.pop();
                        let Some(relation) = next else { break };
                        match copy_table(engine, &mut connection, source, relation, copied_rows, position) {
                            Ok(()) => {}
                            Err(error) if pause_failing && error.table().is_some() => {
                                let mut paused = paused.lock().map_err(|_| PgSourceError::Setup("a copy worker panicked".into()))?;
                                paused.push((relation.relation.name.clone(), relation.relation.table, error.to_string()));
                            }
                            Err(error) => return Err(error),
                        }
                    }
                    connection.simple_query("COMMIT")?;
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(PgSourceError::Setup("a copy worker panicked".into()))))
            .collect()
    });
    for result in results {
        result?;
    }
    let paused = paused.into_inner().map_err(|_| PgSourceError::Setup("a copy worker panicked".into()))?;
    // A half-copied table is not shown as if it were the source's.
    for (_, table, _) in &paused {
        let taken_back: Vec<RowChange> =
            engine.live_keys(*table)?.into_iter().map(|key| RowChange::Delete { table: *table, key }).collect();
        engine.submit_from(source, position.to_string(), taken_back)?;
    }
    Ok(CopyReport {
        tables: relations.len(),
        rows: copied_rows.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
        paused: paused.into_iter().map(|(name, _, error)| (name, error)).collect(),
    })
}

fn copy_table(
    engine: &Engine,
    connection: &mut crate::wire::PgConnection,
    source: &str,
    table: &CopyTable,
    copied_rows: &AtomicU64,
    position: &str,
) -> PgSourceResult<()> {
    let relation = &table.relation;
    let (schema, name) = relation.name.split_once('.').unwrap_or(("public", &relation.name));
    let columns: Vec<String> = relation.columns.iter().map(|c| quote_identifier(&c.name)).collect();
    let qualified = format!("{}.{}", quote_identifier(schema), quote_identifier(name));
    // The filter is the server's own text of the publication's WHERE clause.
    let sql = match (&table.row_filter, table.partitioned) {
        (None, false) => format!("COPY {qualified} ({}) TO STDOUT", columns.join(", ")),
        (None, true) => format!("COPY (SELECT {} FROM {qualified}) TO STDOUT", columns.join(", ")),
        (Some(filter), _) => format!("COPY (SELECT {} FROM {qualified} WHERE {filter}) TO STDOUT", columns.join(", ")),
    };
    let mut scratch = Vec::new();
    let mut ranges = Vec::new();
    let mut chunk: Vec<RowChange> = Vec::with_capacity(COPY_CHUNK_ROWS);
    let mut ordinal: i64 = 0;
    let mut failure: Option<PgSourceError> = None;
    let mut on_line = |line: &[u8]| -> Result<(), String> {
        let result = (|| -> PgSourceResult<()> {
            split_copy_line(line, &mut scratch, &mut ranges).map_err(|reason| {
                PgSourceError::Setup(format!("table {}: malformed COPY line {}: {reason}", relation.name, ordinal + 1))
            })?;
            let fields: Vec<Option<&[u8]>> = ranges.iter().map(|r| r.map(|(s, e)| &scratch[s..e])).collect();
            ordinal += 1;
            let row = relation.copied_row(&fields, -ordinal)?;
            chunk.push(RowChange::Insert { table: relation.table, row });
            if chunk.len() == COPY_CHUNK_ROWS {
                let rows = std::mem::replace(&mut chunk, Vec::with_capacity(COPY_CHUNK_ROWS));
                engine.submit_from(source, position.to_string(), rows)?;
                copied_rows.fetch_add(COPY_CHUNK_ROWS as u64, Ordering::Relaxed);
            }
            Ok(())
        })();
        result.map_err(|error| {
            let text = error.to_string();
            failure = Some(error);
            text
        })
    };
    let outcome = connection.copy_out(&sql, &mut on_line);
    if let Some(error) = failure {
        return Err(error);
    }
    outcome?;
    if !chunk.is_empty() {
        let rows = chunk.len() as u64;
        engine.submit_from(source, position.to_string(), chunk)?;
        copied_rows.fetch_add(rows, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Vec<Option<String>> {
        let mut scratch = Vec::new();
        let mut ranges = Vec::new();
        split_copy_line(line.as_bytes(), &mut scratch, &mut ranges).expect(line);
        ranges.iter().map(|r| r.map(|(s, e)| String::from_utf8(scratch[s..e].to_vec()).expect("utf8"))).collect()
    }

    #[test]
    fn copy_text_format() {
        assert_eq!(split("1\tabc\t\\N\n"), vec![Some("1".into()), Some("abc".into()), None]);
        assert_eq!(split("a\\tb\tc\\\\d\te\\nf"), vec![Some("a\tb".into()), Some("c\\d".into()), Some("e\nf".into())]);
        assert_eq!(split("\\101\\x41\\."), vec![Some("AA.".into())]);
        assert_eq!(split("\t"), vec![Some(String::new()), Some(String::new())]);
        assert_eq!(split("\\\\N"), vec![Some("\\N".into())], "an escaped backslash before N is text");
        let mut scratch = Vec::new();
        let mut ranges = Vec::new();
        assert!(split_copy_line(b"abc\\", &mut scratch, &mut ranges).is_err());
    }
}
