//! `COPY (query) TO STDOUT` and `COPY table [(columns)] TO STDOUT`, in text, CSV or
//! binary format: psql's `\copy … to`, psycopg's `cursor.copy()`, asyncpg's
//! `copy_from_query`, and connectorx (Polars' `read_database_uri`), whose default
//! protocol reads `COPY … TO STDOUT WITH BINARY`. The rows are the query's, encoded
//! by the same Arrow-to-PostgreSQL encoder as a result set (arrow-pg), one
//! `CopyData` per row. COPY into a table or a server file is refused: tables change
//! only by replay, and a server file is the server's disk.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::{stream, Stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyCsvOptions, CopyEncoder, CopyResponse, CopyTextOptions, FieldInfo};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::CopyData;
use retina_query::datafusion::sql::parser::Statement;
use retina_query::datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement as SqlStatement,
};
use retina_query::datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use retina_query::datafusion::sql::sqlparser::parser::Parser;
use retina_query::QueryStream;

use super::encode::{encode_cell, fields};
use super::errors::{stream_error, user_error};
use super::text_values::as_postgres_text;

/// How the rows are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyFormat {
    Text { delimiter: char, null: String, header: bool },
    Csv { delimiter: char, quote: char, escape: char, null: String, header: bool },
    Binary,
}

/// The query of a `COPY … TO STDOUT` and its format; `None` for any other statement.
pub fn copy_to_stdout(statement: &Statement) -> PgWireResult<Option<(Statement, CopyFormat)>> {
    let Statement::Statement(inner) = statement else { return Ok(None) };
    let SqlStatement::Copy { source, to, target, options, legacy_options, .. } = inner.as_ref() else { return Ok(None) };
    if !to {
        return Err(user_error("25006", "COPY FROM is not supported: Retina's tables change only by replay of their sources"));
    }
    if *target != CopyTarget::Stdout {
        return Err(user_error("0A000", format!("COPY TO {target} is not supported; copy to STDOUT (psql: \\copy … to 'file')")));
    }
    let query = match source {
        CopySource::Query(query) => SqlStatement::Query(query.clone()),
        CopySource::Table { table_name, columns } => {
            let columns = if columns.is_empty() {
                "*".to_string()
            } else {
                columns.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            };
            let sql = format!("SELECT {columns} FROM {table_name}");
            let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| user_error("42601", e.to_string()))?;
            parsed.pop().ok_or_else(|| user_error("42601", "COPY names no table"))?
        }
    };
    Ok(Some((Statement::Statement(Box::new(query)), format_of(options, legacy_options)?)))
}

fn format_of(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> PgWireResult<CopyFormat> {
    let unsupported = |what: String| user_error("0A000", format!("COPY option {what} is not supported"));
    let (mut kind, mut delimiter, mut null, mut header, mut quote, mut escape) = ("text".to_string(), None, None, false, '"', None);
    for option in options {
        match option {
            CopyOption::Format(name) => kind = name.value.to_lowercase(),
            CopyOption::Delimiter(c) => delimiter = Some(*c),
            CopyOption::Null(text) => null = Some(text.clone()),
            CopyOption::Header(on) => header = *on,
            CopyOption::Quote(c) => quote = *c,
            CopyOption::Escape(c) => escape = Some(*c),
            CopyOption::Encoding(encoding) if encoding.eq_ignore_ascii_case("utf8") || encoding.eq_ignore_ascii_case("utf-8") => {}
            other => return Err(unsupported(other.to_string())),
        }
    }
    for option in legacy {
        match option {
            CopyLegacyOption::Binary => kind = "binary".into(),
            CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
            CopyLegacyOption::Null(text) => null = Some(text.clone()),
            CopyLegacyOption::Header => header = true,
            CopyLegacyOption::Csv(csv) => {
                kind = "csv".into();
                for csv_option in csv {
                    match csv_option {
                        CopyLegacyCsvOption::Header => header = true,
                        CopyLegacyCsvOption::Quote(c) => quote = *c,
                        CopyLegacyCsvOption::Escape(c) => escape = Some(*c),
                        other => return Err(unsupported(other.to_string())),
                    }
                }
            }
            other => return Err(unsupported(other.to_string())),
        }
    }
    Ok(match kind.as_str() {
        "text" => CopyFormat::Text { delimiter: delimiter.unwrap_or('\t'), null: null.unwrap_or_else(|| "\\N".into()), header },
        "csv" => CopyFormat::Csv {
            delimiter: delimiter.unwrap_or(','),
            quote,
            escape: escape.unwrap_or(quote),
            null: null.unwrap_or_default(),
            header,
        },
        "binary" if delimiter.is_none() && null.is_none() && !header => CopyFormat::Binary,
        "binary" => return Err(user_error("42601", "COPY BINARY takes no DELIMITER, NULL or HEADER")),
        other => return Err(user_error("22023", format!("COPY format \"{other}\" not recognized"))),
    })
}

/// PostgreSQL's binary COPY signature, flags and header extension length: sent
/// ahead of the first row by the encoder, and alone when there is none.
const BINARY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// The COPY response streaming `results` in `format`.
pub fn copy_response(
    results: QueryStream,
    format: &CopyFormat,
    names: &[Option<String>],
) -> PgWireResult<CopyResponse> {
    let schema = results.schema();
    let wire = if *format == CopyFormat::Binary { Format::UnifiedBinary } else { Format::UnifiedText };
    let fields = Arc::new(fields(schema.as_ref(), &wire, None, names)?);
    let header = header_line(format, &fields);
    let encoder = match format {
        CopyFormat::Text { delimiter, null, .. } => {
            CopyEncoder::new_text(Arc::clone(&fields), CopyTextOptions { delimiter: delimiter.to_string().into(), null_string: null.as_str().into() })
        }
        CopyFormat::Csv { delimiter, quote, escape, null, .. } => CopyEncoder::new_csv(
            Arc::clone(&fields),
            CopyCsvOptions {
                delimiter: delimiter.to_string().into(),
                quote: quote.to_string().into(),
                escape: escape.to_string().into(),
                null_string: null.as_str().into(),
                force_quote: Vec::new(),
            },
        ),
        CopyFormat::Binary => CopyEncoder::new_binary(Arc::clone(&fields)),
    };
    let binary = *format == CopyFormat::Binary;
    let columns = fields.len();
    let state = Rows { results, encoder, fields, pending: VecDeque::new(), header, rows: 0, done: false, binary };
    Ok(CopyResponse::new(u8::from(binary) as i8, columns, rows_stream(state)))
}

/// The header line of a text or CSV copy with `HEADER`: the column names, quoted
/// for CSV where they need it.
fn header_line(format: &CopyFormat, fields: &[FieldInfo]) -> Option<Vec<u8>> {
    let names = fields.iter().map(FieldInfo::name);
    let line: String = match format {
        CopyFormat::Text { delimiter, header: true, .. } => names.collect::<Vec<_>>().join(&delimiter.to_string()),
        CopyFormat::Csv { delimiter, quote, escape, header: true, .. } => names
            .map(|name| {
                if name.contains([*delimiter, *quote, '\n', '\r']) {
                    let escaped = name.replace(*quote, &format!("{escape}{quote}"));
                    format!("{quote}{escaped}{quote}")
                } else {
                    name.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(&delimiter.to_string()),
        _ => return None,
    };
    Some(format!("{line}\n").into_bytes())
}

struct Rows {
    results: QueryStream,
    encoder: CopyEncoder,
    fields: Arc<Vec<FieldInfo>>,
    pending: VecDeque<CopyData>,
    /// Sent ahead of the first row (or alone, when there is none).
    header: Option<Vec<u8>>,
    rows: u64,
    done: bool,
    binary: bool,
}

fn rows_stream(state: Rows) -> impl Stream<Item = PgWireResult<CopyData>> + Send + 'static {
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(data) = state.pending.pop_front() {
                return Some((Ok(data), state));
            }
            if state.done {
                return None;
            }
            match state.results.next().await {
                Some(Ok(batch)) => {
                    let batch = match as_postgres_text(batch, &state.fields) {
                        Ok(batch) => batch,
                        Err(error) => {
                            state.done = true;
                            return Some((Err(PgWireError::ApiError(Box::new(error))), state));
                        }
                    };
                    let schema = batch.schema();
                    for row in 0..batch.num_rows() {
                        for (column, array) in batch.columns().iter().enumerate() {
                            if let Err(error) = encode_cell(&mut state.encoder, array, row, schema.field(column), &state.fields[column]) {
                                state.done = true;
                                return Some((Err(error), state));
                            }
                        }
                        let mut data = state.encoder.take_copy();
                        if let Some(header) = state.header.take() {
                            data = CopyData::new([header.as_slice(), data.data.as_ref()].concat().into());
                        }
                        state.rows += 1;
                        state.pending.push_back(data);
                    }
                }
                Some(Err(error)) => {
                    state.done = true;
                    return Some((Err::<CopyData, PgWireError>(stream_error(error)), state));
                }
                None => {
                    state.done = true;
                    if state.rows == 0 {
                        let header = if state.binary { Some(BINARY_HEADER.to_vec()) } else { state.header.take() };
                        state.pending.extend(header.map(|bytes| CopyData::new(bytes.into())));
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use retina_query::datafusion::sql::parser::DFParser;

    use super::*;

    fn parsed(sql: &str) -> PgWireResult<Option<(Statement, CopyFormat)>> {
        let statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses").remove(0);
        copy_to_stdout(&Statement::Statement(Box::new(statement)))
    }

    fn message(result: PgWireResult<Option<(Statement, CopyFormat)>>) -> String {
        match result {
            Err(PgWireError::UserError(info)) => format!("{} {}", info.code, info.message),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn copy_to_stdout_takes_a_query_or_a_table_in_each_format() {
        let (query, format) = parsed("COPY (SELECT 1) TO STDOUT").expect("copy").expect("a copy");
        assert_eq!(query.to_string(), "SELECT 1");
        assert_eq!(format, CopyFormat::Text { delimiter: '\t', null: "\\N".into(), header: false });
        let (query, format) = parsed("COPY shop.items (id, name) TO STDOUT WITH (FORMAT csv, HEADER true)").expect("copy").expect("a copy");
        assert_eq!(query.to_string(), "SELECT id, name FROM shop.items");
        assert_eq!(format, CopyFormat::Csv { delimiter: ',', quote: '"', escape: '"', null: String::new(), header: true });
        let (_, format) = parsed("COPY (SELECT 1) TO STDOUT WITH BINARY").expect("copy").expect("a copy");
        assert_eq!(format, CopyFormat::Binary);
        let (_, format) = parsed("COPY t TO STDOUT CSV HEADER").expect("copy").expect("a copy");
        assert!(matches!(format, CopyFormat::Csv { header: true, .. }));
        let plain = DFParser::parse_sql("SELECT 1").expect("parses").pop_front().expect("one");
        assert!(copy_to_stdout(&plain).expect("not a copy").is_none());
    }

    #[test]
    fn copies_retina_cannot_do_are_refused_with_a_reason() {
        assert!(message(parsed("COPY t FROM STDIN")).starts_with("25006 COPY FROM is not supported"));
        assert!(message(parsed("COPY t TO '/tmp/x'")).contains("copy to STDOUT"));
        assert!(message(parsed("COPY t TO STDOUT (FORMAT xml)")).contains("\"xml\" not recognized"));
        assert!(message(parsed("COPY t TO STDOUT (FORMAT binary, HEADER true)")).contains("no DELIMITER, NULL or HEADER"));
    }
}
