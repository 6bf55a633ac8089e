//! How complex a statement may be, checked on its tokens before it is parsed.
//!
//! A chain of operators (`1+1+…+1`, `… UNION ALL …`, `a = 1 OR a = 2 OR …`) parses
//! into a tree as deep as the chain is long, and every recursive walk over it
//! (rewrites, analyzer rules, the optimizer, `Drop`) takes stack in proportion: a
//! 2 KB query overflowed a runtime thread's stack and aborted the whole server. The
//! parser itself builds such chains in a loop, so its recursion limit (which bounds
//! parentheses) does not see them. Counting the tokens that can join two operands is
//! a bound on that depth that costs one pass of the tokenizer, before any tree exists.
//! PostgreSQL refuses what its stack cannot hold with the same SQLSTATE (54001).

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{QueryError, QueryResult};

/// The most operators one statement may hold: far beyond hand-written and generated
/// SQL, and within what the server's planning threads' stacks hold (retina-server).
pub const MAX_OPERATORS_PER_STATEMENT: usize = 4_000;

/// The most arithmetic operators (`+ - * / %`) one statement may hold. Integer
/// arithmetic becomes PostgreSQL's checked functions ([`crate::pg_arithmetic`]), and
/// DataFusion names a function call by formatting its whole argument tree each time it
/// asks a node's type, so planning a chain of n of them costs about n³: 200 terms
/// planned in 4.4 s in a debug build, 1,000 would take minutes while holding a
/// planning thread. Known limit: naming that does not recurse would lift it.
pub const MAX_ARITHMETIC_PER_STATEMENT: usize = 256;

/// Refuses `sql` with [`QueryError::TooComplex`] (54001) when one of its statements
/// joins more than [`MAX_OPERATORS_PER_STATEMENT`] operands. Text the tokenizer
/// refuses passes: the parser reports it with its own message.
pub fn check_complexity(sql: &str) -> QueryResult<()> {
    let dialect = PostgreSqlDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else { return Ok(()) };
    let (mut operators, mut arithmetic) = (0usize, 0usize);
    for token in &tokens {
        if matches!(token, Token::SemiColon) {
            (operators, arithmetic) = (0, 0);
            continue;
        }
        if matches!(token, Token::Plus | Token::Minus | Token::Mul | Token::Div | Token::Mod) {
            arithmetic += 1;
            if arithmetic > MAX_ARITHMETIC_PER_STATEMENT {
                return Err(QueryError::TooComplex {
                    reason: format!("more than {MAX_ARITHMETIC_PER_STATEMENT} arithmetic operators in one statement"),
                });
            }
        }
        if joins_operands(token) {
            operators += 1;
            if operators > MAX_OPERATORS_PER_STATEMENT {
                return Err(QueryError::TooComplex {
                    reason: format!("more than {MAX_OPERATORS_PER_STATEMENT} operators in one statement"),
                });
            }
        }
    }
    Ok(())
}

/// Whether `token` can join two operands (or stack on one, as `NOT` and casts do),
/// making the tree one level deeper.
fn joins_operands(token: &Token) -> bool {
    match token {
        Token::Word(word) => matches!(
            word.keyword,
            Keyword::AND | Keyword::OR | Keyword::NOT | Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT | Keyword::IS
        ),
        Token::EOF
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Comma
        | Token::Whitespace(_)
        | Token::LParen
        | Token::RParen
        | Token::Period
        | Token::SemiColon
        | Token::Placeholder(_)
        | Token::LBracket
        | Token::RBracket
        | Token::LBrace
        | Token::RBrace
        | Token::Colon => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_operator_chains_are_refused_and_ordinary_queries_pass() {
        let at_limit = format!("SELECT {}", vec!["1"; MAX_ARITHMETIC_PER_STATEMENT + 1].join("+"));
        assert!(check_complexity(&at_limit).is_ok());
        let over = format!("SELECT {}", vec!["1"; MAX_ARITHMETIC_PER_STATEMENT + 2].join("+"));
        let error = check_complexity(&over).expect_err("too long a chain");
        assert_eq!(error.sqlstate(), "54001");
        assert!(error.to_string().contains("statement too complex"), "{error}");
        let comparisons = format!("SELECT 1 WHERE {}", vec!["a = 1"; MAX_OPERATORS_PER_STATEMENT / 2].join(" AND "));
        assert!(check_complexity(&comparisons).is_ok(), "comparisons and AND count against the larger limit");
        let unions = vec!["SELECT 1"; MAX_OPERATORS_PER_STATEMENT + 2].join(" UNION ALL ");
        assert_eq!(check_complexity(&unions).expect_err("unions").sqlstate(), "54001");
        let ors = format!("SELECT 1 WHERE {}", vec!["a = 1"; MAX_OPERATORS_PER_STATEMENT].join(" OR "));
        assert_eq!(check_complexity(&ors).expect_err("an OR chain counts its = and OR").sqlstate(), "54001");
        // Each statement counts on its own; lists, strings and comments are no operators.
        let many = vec![format!("SELECT {}", vec!["1"; 200].join("+")); 3].join("; ");
        assert!(check_complexity(&many).is_ok());
        let list = format!("SELECT 1 WHERE a IN ({}) AND b = '{}' -- {}", vec!["1"; 50_000].join(","), "+".repeat(10_000), "+".repeat(10_000));
        assert!(check_complexity(&list).is_ok());
        assert!(check_complexity("SELECT 'unterminated").is_ok(), "the parser words that error");
    }
}
