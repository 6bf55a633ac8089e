//! Query results as text, printed by `retina sql` as an aligned table, CSV or JSON.
//! The same type carries results from a server (PostgreSQL text format) and from an
//! embedded session (Arrow batches rendered with Arrow's display rules).

use pgwire::api::Type;
use retina_query::datafusion::arrow::array::Array;
use retina_query::datafusion::arrow::datatypes::Schema;
use retina_query::datafusion::arrow::error::ArrowError;
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

#[derive(Clone, Debug, PartialEq)]
pub struct TextColumn {
    pub name: String,
    /// PostgreSQL type OID.
    pub type_oid: u32,
}

/// Invariant: every row has one value per column.
#[derive(Clone, Debug, PartialEq)]
pub struct TextResult {
    pub columns: Vec<TextColumn>,
    pub rows: Vec<Vec<Option<String>>>,
}

/// How `retina sql` prints results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
}

impl TextResult {
    pub fn new(columns: Vec<TextColumn>) -> Self {
        Self { columns, rows: Vec::new() }
    }

    /// Renders Arrow batches (of `schema`) as text.
    pub fn from_batches(schema: &Schema, batches: &[RecordBatch]) -> Result<Self, ArrowError> {
        let columns = schema
            .fields()
            .iter()
            .map(|field| TextColumn {
                name: field.name().clone(),
                type_oid: arrow_pg::datatypes::into_pg_type(field.data_type()).map_or(Type::TEXT.oid(), |t| t.oid()),
            })
            .collect();
        let mut result = Self::new(columns);
        // Not "safe": a value Arrow cannot show (a timestamp outside chrono's years)
        // is an error, not its message printed as the cell's text.
        let options = FormatOptions::default().with_display_error(false);
        for batch in batches {
            let formatters = batch
                .columns()
                .iter()
                .map(|array| ArrayFormatter::try_new(array.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()?;
            for row in 0..batch.num_rows() {
                let values = batch
                    .columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(array, formatter)| (!array.is_null(row)).then(|| formatter.value(row).try_to_string()).transpose())
                    .collect::<Result<_, _>>()?;
                result.rows.push(values);
            }
        }
        Ok(result)
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Table => self.table(),
            OutputFormat::Csv => self.csv(),
            OutputFormat::Json => self.json(),
        }
    }

    /// psql's aligned format: header, rule, rows, row count.
    fn table(&self) -> String {
        let cell = |value: &Option<String>| value.clone().unwrap_or_default();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.name.chars().count()).collect();
        for row in &self.rows {
            for (width, value) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell(value).chars().count());
            }
        }
        let numeric: Vec<bool> = self.columns.iter().map(|c| is_numeric(c.type_oid)).collect();
        let pad = |text: &str, width: usize, right: bool| {
            let fill = " ".repeat(width.saturating_sub(text.chars().count()));
            if right { format!("{fill}{text}") } else { format!("{text}{fill}") }
        };
        let mut out = String::new();
        let header: Vec<String> = self.columns.iter().zip(&widths).map(|(c, &w)| pad(&c.name, w, false)).collect();
        out.push(' ');
        out.push_str(&header.join(" | "));
        out.push('\n');
        out.push_str(&widths.iter().map(|&w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"));
        out.push('\n');
        for row in &self.rows {
            let cells: Vec<String> =
                row.iter().zip(&widths).zip(&numeric).map(|((value, &w), &right)| pad(&cell(value), w, right)).collect();
            out.push(' ');
            out.push_str(&cells.join(" | "));
            out.push('\n');
        }
        let count = self.rows.len();
        out.push_str(&format!("({count} row{})\n", if count == 1 { "" } else { "s" }));
        out
    }

    /// RFC 4180: header line; fields with a comma, quote or line break are quoted;
    /// NULL is an empty field.
    fn csv(&self) -> String {
        let field = |text: &str| {
            if text.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", text.replace('"', "\"\""))
            } else {
                text.to_string()
            }
        };
        let mut out = String::new();
        out.push_str(&self.columns.iter().map(|c| field(&c.name)).collect::<Vec<_>>().join(","));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&row.iter().map(|v| v.as_deref().map(field).unwrap_or_default()).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }

    /// A JSON array of objects; numbers and booleans as JSON values, NULL as null.
    /// Numbers are written with the digits they have: a `numeric` of 38 digits, or
    /// `12.50`, would lose digits or its scale as an `f64` (serde_json's number,
    /// without its `arbitrary_precision` feature, which would change every other
    /// JSON parse in the process).
    fn json(&self) -> String {
        let names: Vec<String> = self.columns.iter().map(|column| serde_json::Value::String(column.name.clone()).to_string()).collect();
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|row| {
                let fields: Vec<String> = self
                    .columns
                    .iter()
                    .zip(&names)
                    .zip(row)
                    .map(|((column, name), value)| format!("{name}:{}", json_value(column.type_oid, value.as_deref())))
                    .collect();
                format!("{{{}}}", fields.join(","))
            })
            .collect();
        format!("[{}]\n", rows.join(","))
    }
}

fn is_numeric(oid: u32) -> bool {
    [Type::INT2, Type::INT4, Type::INT8, Type::FLOAT4, Type::FLOAT8, Type::NUMERIC, Type::OID].iter().any(|t| t.oid() == oid)
}

/// One value as JSON text.
fn json_value(oid: u32, value: Option<&str>) -> String {
    let Some(text) = value else { return "null".into() };
    if oid == Type::BOOL.oid() {
        match text {
            "t" | "true" => return "true".into(),
            "f" | "false" => return "false".into(),
            _ => {}
        }
    }
    if is_numeric(oid) && is_json_number(text) {
        return text.to_string();
    }
    serde_json::Value::String(text.to_string()).to_string()
}

/// Whether `text` is a number as JSON writes it (RFC 8259 §6): `NaN`, `inf` or
/// `1.` are not, and stay strings.
fn is_json_number(text: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = text.strip_prefix('-').unwrap_or(text);
    let int = digits(rest);
    if int == 0 || (int > 1 && rest.starts_with('0')) {
        return false;
    }
    let mut rest = &rest[int..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    if let Some(exponent) = rest.strip_prefix(['e', 'E']) {
        let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        let n = digits(exponent);
        return n > 0 && n == exponent.len();
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn sample() -> TextResult {
        TextResult {
            columns: vec![
                TextColumn { name: "id".into(), type_oid: Type::INT4.oid() },
                TextColumn { name: "name".into(), type_oid: Type::TEXT.oid() },
                TextColumn { name: "ok".into(), type_oid: Type::BOOL.oid() },
            ],
            rows: vec![
                vec![Some("1".into()), Some("a,b".into()), Some("t".into())],
                vec![Some("22".into()), None, Some("f".into())],
            ],
        }
    }

    /// A value Arrow cannot show fails the result; its error message is not printed
    /// as the cell's text (which `retina sql` then gave with exit status 0).
    #[test]
    fn a_value_that_cannot_be_shown_is_an_error_not_a_cell() {
        use retina_query::datafusion::arrow::array::TimestampMicrosecondArray;
        use retina_query::datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
        let schema = Arc::new(Schema::new(vec![Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true)]));
        let shown = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(TimestampMicrosecondArray::from(vec![Some(0), None]))]).expect("batch");
        let result = TextResult::from_batches(&schema, &[shown]).expect("shown");
        assert_eq!(result.rows, vec![vec![Some("1970-01-01T00:00:00".to_string())], vec![None]]);
        let sentinel = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(TimestampMicrosecondArray::from(vec![9_223_372_036_825_200_000]))]).expect("batch");
        let error = TextResult::from_batches(&schema, &[sentinel]).expect_err("not a date");
        assert!(error.to_string().contains("9223372036825200000"), "{error}");
    }

    #[test]
    fn table_aligns_numbers_right_and_counts_rows() {
        let table = sample().render(OutputFormat::Table);
        assert_eq!(table, " id | name | ok\n----+------+----\n  1 | a,b  | t \n 22 |      | f \n(2 rows)\n");
    }

    #[test]
    fn csv_quotes_and_json_types() {
        assert_eq!(sample().render(OutputFormat::Csv), "id,name,ok\n1,\"a,b\",t\n22,,f\n");
        let json: serde_json::Value = serde_json::from_str(&sample().render(OutputFormat::Json)).expect("json");
        assert_eq!(json[0]["id"], 1);
        assert_eq!(json[0]["ok"], true);
        assert!(json[1]["name"].is_null());
    }

    /// Decimals keep every digit and their scale; what is not a JSON number
    /// (NaN, infinities) is a string; names and texts are escaped.
    #[test]
    fn json_numbers_keep_their_digits() {
        let result = TextResult {
            columns: vec![
                TextColumn { name: "d".into(), type_oid: Type::NUMERIC.oid() },
                TextColumn { name: "f\"x".into(), type_oid: Type::FLOAT8.oid() },
                TextColumn { name: "t".into(), type_oid: Type::TEXT.oid() },
            ],
            rows: vec![
                vec![Some("123456789876543212345678987654321.110".into()), Some("NaN".into()), Some("a\"b\n".into())],
                vec![Some("-12345.110".into()), Some("1.5e-7".into()), None],
                vec![Some("0.5".into()), Some("inf".into()), Some("12".into())],
            ],
        };
        let text = result.render(OutputFormat::Json);
        assert_eq!(
            text,
            "[{\"d\":123456789876543212345678987654321.110,\"f\\\"x\":\"NaN\",\"t\":\"a\\\"b\\n\"},\
             {\"d\":-12345.110,\"f\\\"x\":1.5e-7,\"t\":null},\
             {\"d\":0.5,\"f\\\"x\":\"inf\",\"t\":\"12\"}]\n"
        );
        serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
        for bad in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5x", "NaN", "0x10"] {
            assert!(!is_json_number(bad), "{bad}");
        }
        for good in ["0", "-0", "10", "0.25", "1E5", "2e-3", "-7.5E+2"] {
            assert!(is_json_number(good), "{good}");
        }
    }
}
