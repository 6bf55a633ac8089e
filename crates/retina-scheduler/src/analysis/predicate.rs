//! Partition constraints from predicates and PARTITION clauses.
//!
//! Only what can be *proven* narrows an access: equality and IN with literals on a
//! declared partition column of the target, combined with AND (and OR over the
//! same single column). Everything else — functions, ranges, comparisons between
//! columns, NOT IN — leaves the column unconstrained, which is the safe direction
//! (an unconstrained access overlaps every partition).

use std::collections::{BTreeMap, BTreeSet};

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value};

/// Column → allowed values. Empty map = unconstrained. A column whose value set
/// became empty through AND is a contradiction; `PartitionSpec::from_pairs` turns
/// that into the whole table.
pub type Constraint = BTreeMap<String, BTreeSet<String>>;

/// Which table a predicate is about: how its columns may be qualified, and
/// whether bare column names refer to it.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// Lower-cased qualifiers that name the target (its alias, or its name and
    /// the name's last part when it has no alias).
    pub qualifiers: Vec<String>,
    /// Whether an unqualified column refers to the target (only when it is the
    /// sole table in scope).
    pub allow_unqualified: bool,
    /// The target's declared partition columns (lower-case).
    pub partition_columns: &'a [String],
}

impl Target<'_> {
    /// The partition column `expr` names, if it is a column of the target.
    fn column_of(&self, expr: &Expr) -> Option<String> {
        let (qualifier, col) = match expr {
            Expr::Identifier(id) => (None, id.value.to_lowercase()),
            Expr::CompoundIdentifier(parts) => {
                let (last, prefix) = parts.split_last()?;
                let q: Vec<String> = prefix.iter().map(|p| p.value.to_lowercase()).collect();
                (Some(q.join(".")), last.value.to_lowercase())
            }
            Expr::Nested(inner) => return self.column_of(inner),
            _ => return None,
        };
        let in_scope = match qualifier {
            None => self.allow_unqualified,
            Some(q) => self.qualifiers.iter().any(|t| *t == q || super::names::is_suffix(&q, t)),
        };
        (in_scope && self.partition_columns.contains(&col)).then_some(col)
    }
}

/// The constraint `expr` proves about the target's partitions.
pub fn constraint_of(expr: &Expr, target: &Target<'_>) -> Constraint {
    if target.partition_columns.is_empty() {
        return Constraint::new();
    }
    walk(expr, target).unwrap_or_default()
}

/// The constraint of a `PARTITION (col = v, col2)` clause: a bare column is a
/// dynamic partition and constrains nothing.
pub fn constraint_of_partition_clause(exprs: &[Expr], target: &Target<'_>) -> Constraint {
    let mut acc = Constraint::new();
    for e in exprs {
        if let Some(c) = walk(e, target) {
            acc = and(acc, c);
        }
    }
    acc
}

fn walk(expr: &Expr, t: &Target<'_>) -> Option<Constraint> {
    match expr {
        Expr::Nested(inner) => walk(inner, t),
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => match (walk(left, t), walk(right, t)) {
            (Some(a), Some(b)) => Some(and(a, b)),
            (Some(a), None) | (None, Some(a)) => Some(a),
            (None, None) => None,
        },
        Expr::BinaryOp { left, op: BinaryOperator::Or, right } => {
            let (a, b) = (walk(left, t)?, walk(right, t)?);
            // Only "col = x OR col = y" on one and the same column stays exact.
            if a.len() == 1 && b.len() == 1 && a.keys().eq(b.keys()) {
                let mut out = a;
                for (col, vals) in b {
                    out.entry(col).or_default().extend(vals);
                }
                Some(out)
            } else {
                None
            }
        }
        Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => {
            let (col, lit) = match (t.column_of(left), literal(right)) {
                (Some(c), Some(v)) => (c, v),
                _ => (t.column_of(right)?, literal(left)?),
            };
            Some(Constraint::from([(col, BTreeSet::from([lit]))]))
        }
        Expr::InList { expr, list, negated: false } => {
            let col = t.column_of(expr)?;
            let vals: Option<BTreeSet<String>> = list.iter().map(literal).collect();
            Some(Constraint::from([(col, vals?)]))
        }
        _ => None,
    }
}

/// Conjunction: per-column intersection.
fn and(mut a: Constraint, b: Constraint) -> Constraint {
    for (col, vals) in b {
        match a.get_mut(&col) {
            Some(existing) => existing.retain(|v| vals.contains(v)),
            None => {
                a.insert(col, vals);
            }
        }
    }
    a
}

/// The canonical text of a literal, or `None` if `expr` is not one. Numbers (and
/// numeric-looking strings) are canonicalised so `5`, `'5'` and `5.0` are the same
/// partition value: treating them as equal can only add conflicts, never hide one.
pub fn literal(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Nested(inner) => literal(inner),
        Expr::Value(v) => value_text(&v.value),
        Expr::TypedString(ts) => value_text(&ts.value.value),
        Expr::Cast { expr, .. } => literal(expr),
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => literal(expr).map(|s| canonical(&format!("-{s}"))),
        _ => None,
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(canonical(s)),
        Value::Number(s, _) => Some(canonical(s)),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn canonical(s: &str) -> String {
    let looks_numeric = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        && s.chars().any(|c| c.is_ascii_digit());
    if looks_numeric {
        if let Ok(f) = s.parse::<f64>() {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
                return format!("{}", f as i64);
            }
            if f.is_finite() {
                return format!("{f}");
            }
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    fn expr(sql: &str) -> Expr {
        let mut p = Parser::new(&GenericDialect {}).try_with_sql(sql).expect("tokenize");
        p.parse_expr().expect("parse")
    }

    fn target(cols: &[String]) -> Target<'_> {
        Target { qualifiers: vec!["t".into()], allow_unqualified: true, partition_columns: cols }
    }

    #[test]
    fn equality_in_and_or() {
        let cols = vec!["d".to_string(), "r".to_string()];
        let t = target(&cols);
        let c = constraint_of(&expr("d = '2024-01-01' AND x > 3 AND t.r IN ('eu', 'us')"), &t);
        assert_eq!(c["d"], BTreeSet::from(["2024-01-01".to_string()]));
        assert_eq!(c["r"].len(), 2);
        let c = constraint_of(&expr("(d = 1 OR d = 2)"), &t);
        assert_eq!(c["d"], BTreeSet::from(["1".to_string(), "2".to_string()]));
        assert!(constraint_of(&expr("d = 1 OR r = 2"), &t).is_empty());
        assert!(constraint_of(&expr("d > 1"), &t).is_empty());
        assert!(constraint_of(&expr("d NOT IN (1)"), &t).is_empty());
        assert!(constraint_of(&expr("s.d = 1"), &t).is_empty(), "other table's column");
        assert!(constraint_of(&expr("d = e"), &t).is_empty());
        assert_eq!(constraint_of(&expr("'7' = d"), &t)["d"], BTreeSet::from(["7".to_string()]));
        assert_eq!(constraint_of(&expr("d = 7.0"), &t)["d"], BTreeSet::from(["7".to_string()]));
        assert_eq!(constraint_of(&expr("d = DATE '2024-01-01'"), &t)["d"].len(), 1);
    }
}
