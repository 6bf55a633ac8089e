//! The SQL dialects a job's SQL can be parsed with.

use sqlparser::dialect::{DatabricksDialect, Dialect, GenericDialect, HiveDialect};

/// Dialect of a job's SQL. Spark SQL has no dialect of its own in sqlparser; the
/// Databricks dialect is Spark SQL plus Delta extensions, so `spark` maps to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqlDialect {
    /// sqlparser's permissive generic dialect.
    Generic,
    /// Databricks SQL (the default: the paper's platform).
    #[default]
    Databricks,
    /// HiveQL (`INSERT OVERWRITE TABLE t PARTITION (...)`).
    Hive,
    /// Spark SQL, parsed with the Databricks dialect.
    Spark,
}

impl SqlDialect {
    /// Parses `generic`, `databricks`, `hive` or `spark` (any case).
    pub fn parse(s: &str) -> Option<SqlDialect> {
        match s.to_ascii_lowercase().as_str() {
            "generic" => Some(SqlDialect::Generic),
            "databricks" => Some(SqlDialect::Databricks),
            "hive" => Some(SqlDialect::Hive),
            "spark" | "sparksql" | "spark-sql" => Some(SqlDialect::Spark),
            _ => None,
        }
    }

    /// The sqlparser dialect object.
    pub fn dialect(self) -> Box<dyn Dialect> {
        match self {
            SqlDialect::Generic => Box::new(GenericDialect {}),
            SqlDialect::Databricks | SqlDialect::Spark => Box::new(DatabricksDialect {}),
            SqlDialect::Hive => Box::new(HiveDialect {}),
        }
    }
}

/// A `CREATE TABLE … USING <format>` clause found (and removed) in a job's SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateFormat {
    /// 1-based number of the statement it is in.
    pub statement: usize,
    pub format: String,
}

/// Removes the `USING <format>` clause of CREATE TABLE statements, which Spark and
/// Databricks write before `PARTITIONED BY` and sqlparser's Databricks dialect does
/// not parse; returns the text without them and the formats removed (so a caller
/// that holds only Delta tables can refuse others). Works on tokens, so `USING` in
/// strings, comments, `MERGE … USING` and `JOIN … USING (…)` stays.
pub fn take_create_using(dialect: &dyn Dialect, sql: &str) -> (String, Vec<CreateFormat>) {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize() else {
        // The parser reports the same error with its position.
        return (sql.to_string(), Vec::new());
    };
    let mut out = String::with_capacity(sql.len());
    let mut formats = Vec::new();
    let (mut statement, mut in_create, mut depth, mut in_query) = (1, false, 0i32, false);
    let significant = |i: usize| significant(&tokens, i);
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::SemiColon => {
                statement += 1;
                (in_create, depth, in_query) = (false, 0, false);
            }
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if w.keyword == Keyword::CREATE && !in_create => in_create = true,
            Token::Word(w) if in_create && depth == 0 && w.keyword == Keyword::AS => in_query = true,
            Token::Word(w) if in_create && !in_query && depth == 0 && w.keyword == Keyword::USING => {
                if let Some(next) = significant(i + 1) {
                    if let Token::Word(format) = &tokens[next] {
                        formats.push(CreateFormat { statement, format: format.value.clone() });
                        i = next + 1;
                        continue;
                    }
                }
            }
            _ => {}
        }
        out.push_str(&token.to_string());
        i += 1;
    }
    (out, formats)
}

/// A job's SQL with the Spark/Delta clauses sqlparser lacks taken out (`USING
/// <format>` of CREATE TABLE, `REPLACE WHERE` of INSERT): the text the parser
/// reads, and what was taken, for callers to apply.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub text: String,
    pub formats: Vec<CreateFormat>,
    pub replaced: Vec<ReplaceWhere>,
}

/// [`take_create_using`], then [`take_replace_where`].
pub fn prepare(dialect: &dyn Dialect, sql: &str) -> Prepared {
    let (text, formats) = take_create_using(dialect, sql);
    let (text, replaced) = take_replace_where(dialect, &text);
    Prepared { text, formats, replaced }
}

/// The index of the first token at or after `i` that is not whitespace.
fn significant(tokens: &[sqlparser::tokenizer::Token], i: usize) -> Option<usize> {
    tokens.get(i..)?.iter().position(|t| !matches!(t, sqlparser::tokenizer::Token::Whitespace(_))).map(|p| p + i)
}

/// An `INSERT INTO t REPLACE WHERE <predicate> <query>` found (and its clause
/// removed) in a job's SQL: Delta's overwrite of the rows matching the predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaceWhere {
    /// 1-based number of the statement it is in.
    pub statement: usize,
    /// The predicate's SQL text.
    pub predicate: String,
}

/// Removes the `REPLACE WHERE <predicate>` clause of `INSERT INTO` statements
/// (Delta's selective overwrite), which sqlparser does not parse; returns the text
/// with a plain `INSERT INTO t <query>` in its place and the predicates removed, so
/// callers treat those inserts as overwrites of what the predicate matches. The
/// predicate ends where the query starts (`SELECT`, `WITH`, `VALUES`, `TABLE`,
/// `FROM` or a parenthesized query, outside parentheses). Works on tokens.
pub fn take_replace_where(dialect: &dyn Dialect, sql: &str) -> (String, Vec<ReplaceWhere>) {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize() else {
        return (sql.to_string(), Vec::new());
    };
    let significant = |i: usize| significant(&tokens, i);
    let keyword = |i: Option<usize>| match i.map(|i| &tokens[i]) {
        Some(Token::Word(w)) => Some(w.keyword),
        _ => None,
    };
    let previous = |i: usize| tokens[..i].iter().rposition(|t| !matches!(t, Token::Whitespace(_)));
    // `(SELECT …)` is the query when it follows a complete predicate (a name, a
    // literal or `)`), and a subquery of the predicate after `IN`, `=`, `(`, ….
    let ends_expression = |i: Option<usize>| match i.map(|i| &tokens[i]) {
        Some(Token::Word(w)) => w.keyword == Keyword::NoKeyword || w.quote_style.is_some() || matches!(w.keyword, Keyword::NULL | Keyword::TRUE | Keyword::FALSE),
        Some(Token::Number(..) | Token::SingleQuotedString(_) | Token::DoubleQuotedString(_) | Token::RParen) => true,
        _ => false,
    };
    let starts_query = |i: usize| match &tokens[i] {
        Token::Word(w) => matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES | Keyword::TABLE | Keyword::FROM),
        Token::LParen => matches!(keyword(significant(i + 1)), Some(Keyword::SELECT | Keyword::WITH | Keyword::VALUES)) && ends_expression(previous(i)),
        _ => false,
    };
    let mut out = String::with_capacity(sql.len());
    let mut found = Vec::new();
    let (mut statement, mut in_insert, mut depth) = (1, false, 0i32);
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::SemiColon => {
                statement += 1;
                (in_insert, depth) = (false, 0);
            }
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if w.keyword == Keyword::INSERT && depth == 0 => in_insert = true,
            Token::Word(w) if in_insert && depth == 0 && w.keyword == Keyword::REPLACE && keyword(significant(i + 1)) == Some(Keyword::WHERE) => {
                let mut j = significant(i + 1).map_or(tokens.len(), |w| w + 1);
                let (start, mut inner) = (j, 0i32);
                while j < tokens.len() && !(inner == 0 && (starts_query(j) || tokens[j] == Token::SemiColon)) {
                    match tokens[j] {
                        Token::LParen => inner += 1,
                        Token::RParen => inner -= 1,
                        _ => {}
                    }
                    j += 1;
                }
                let predicate: String = tokens[start..j].iter().map(Token::to_string).collect();
                found.push(ReplaceWhere { statement, predicate: predicate.trim().to_string() });
                in_insert = false;
                i = j;
                continue;
            }
            _ if in_insert && depth == 0 && starts_query(i) => in_insert = false,
            _ => {}
        }
        out.push_str(&token.to_string());
        i += 1;
    }
    (out, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_using_is_taken_out_of_create_statements_only() {
        let sql = "CREATE TABLE a.b (x INT) USING DELTA PARTITIONED BY (x);\n\
                   MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE;\n\
                   CREATE TABLE c USING parquet AS SELECT * FROM d JOIN e USING (id) WHERE n = 'USING x'";
        let (text, formats) = take_create_using(&DatabricksDialect {}, sql);
        assert_eq!(
            formats,
            vec![CreateFormat { statement: 1, format: "DELTA".into() }, CreateFormat { statement: 3, format: "parquet".into() }]
        );
        assert!(text.contains("MERGE INTO t USING s") && text.contains("JOIN e USING (id)") && text.contains("'USING x'"), "{text}");
        assert!(!text.contains("USING DELTA") && !text.contains("USING parquet"), "{text}");
        let parsed = sqlparser::parser::Parser::parse_sql(&DatabricksDialect {}, &text).expect("parses once the clause is out");
        assert_eq!(parsed.len(), 3);
    }

    #[test]
    fn replace_where_is_taken_out_of_inserts_with_its_predicate() {
        let sql = "INSERT INTO mart.daily REPLACE WHERE day = DATE '2025-01-15' AND (kind = 'a' OR kind = 'b') SELECT * FROM staging.raw WHERE day = '2025-01-15';\n\
                   INSERT INTO t SELECT 'REPLACE WHERE' AS x;\n\
                   INSERT INTO u REPLACE WHERE n IN (SELECT n FROM v) (SELECT 1 AS n)";
        let (text, found) = take_replace_where(&DatabricksDialect {}, sql);
        assert_eq!(
            found,
            vec![
                ReplaceWhere { statement: 1, predicate: "day = DATE '2025-01-15' AND (kind = 'a' OR kind = 'b')".into() },
                ReplaceWhere { statement: 3, predicate: "n IN (SELECT n FROM v)".into() },
            ]
        );
        assert!(text.contains("INSERT INTO mart.daily SELECT * FROM staging.raw WHERE day = '2025-01-15'"), "{text}");
        assert!(text.contains("'REPLACE WHERE'") && text.contains("INSERT INTO u (SELECT 1 AS n)"), "{text}");
        let parsed = sqlparser::parser::Parser::parse_sql(&DatabricksDialect {}, &text).expect("parses once the clause is out");
        assert_eq!(parsed.len(), 3);
    }
}
