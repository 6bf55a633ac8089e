//! SQL statements → the steps the executor runs, decided before anything runs.
//!
//! Each statement of a task becomes one [`Step`] (or an [`JobsError::Unsupported`]
//! naming task, statement, position and what we cannot do), so `retina jobs run
//! --check` refuses a job before its first commit. A step keeps sqlparser's AST for
//! the expressions; `execute` renders them for delta-rs once subqueries are
//! evaluated.

use std::ops::ControlFlow;

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use retina_scheduler::analysis::dialect::ReplaceWhere;
use retina_scheduler::analysis::names::normalize;
use retina_scheduler::TableCatalog;
use sqlparser::ast::{
    self, AssignmentTarget, ColumnDef, Expr, FromTable, HiveDistributionStyle, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    Statement, TableFactor, TableObject,
};

use sqlparser::dialect::Dialect;
use sqlparser::parser::Parser;

use crate::error::{JobsError, Result};

/// One statement as the executor runs it. Table names are normalized and qualified
/// (`schema.table`, lower case).
#[derive(Debug, Clone)]
pub enum Step {
    /// A query whose rows are read and dropped (a check, a warm-up).
    Query { sql: String },
    /// `CREATE TABLE … [USING DELTA] [PARTITIONED BY (…)] [AS SELECT …]`.
    CreateTable { table: String, schema: Option<Schema>, partition_columns: Vec<String>, if_not_exists: bool, or_replace: bool, query: Option<String> },
    /// `INSERT [INTO | OVERWRITE] t [PARTITION (c = v, …)] [(cols)] query`, and
    /// `INSERT INTO t REPLACE WHERE p query` (an overwrite of the rows `p` matches).
    Insert { table: String, overwrite: bool, partition: Vec<(String, Expr)>, replace_where: Option<Expr>, columns: Vec<String>, query: String },
    /// `UPDATE t [AS a] SET c = e, … [WHERE p]`.
    Update { table: String, qualifiers: Vec<String>, assignments: Vec<(String, Expr)>, predicate: Option<Expr> },
    /// `DELETE FROM t [AS a] [WHERE p]`.
    Delete { table: String, qualifiers: Vec<String>, predicate: Option<Expr> },
    /// `MERGE INTO t [AS a] USING source [AS s] ON p WHEN …`.
    Merge { table: String, target_alias: String, target_qualifiers: Vec<String>, source: MergeSource, source_alias: String, on: Expr, clauses: Vec<MergeClause> },
}

/// Where a MERGE's source rows come from.
#[derive(Debug, Clone)]
pub enum MergeSource {
    Table(String),
    Query(String),
}

/// One `WHEN … THEN …` clause of a MERGE, in order.
#[derive(Debug, Clone)]
pub struct MergeClause {
    pub kind: MergeClauseKind,
    pub predicate: Option<Expr>,
    pub action: MergeStep,
}

#[derive(Debug, Clone)]
pub enum MergeStep {
    Update(Vec<(String, Expr)>),
    Delete,
    Insert { columns: Vec<String>, values: Vec<Expr> },
}

impl Step {
    /// The table the step writes, if it writes one.
    pub fn target(&self) -> Option<&str> {
        match self {
            Step::Query { .. } => None,
            Step::CreateTable { table, .. }
            | Step::Insert { table, .. }
            | Step::Update { table, .. }
            | Step::Delete { table, .. }
            | Step::Merge { table, .. } => Some(table),
        }
    }
}

/// A parsed statement with what the executor needs besides its step.
#[derive(Debug, Clone)]
pub struct PlannedStatement {
    pub step: Step,
    /// Every table the statement names (read or written), qualified.
    pub tables: Vec<String>,
    /// "line L, column C", for errors.
    pub position: String,
}

/// Translates the statements of `task`; the first one we cannot execute is an
/// error naming it.
/// `replaced` are the `REPLACE WHERE` clauses taken out of the text before it was
/// parsed (`take_replace_where`), parsed here with `dialect`.
pub fn plan_statements(task: &str, statements: &[Statement], catalog: &TableCatalog, replaced: &[ReplaceWhere], dialect: &dyn Dialect) -> Result<Vec<PlannedStatement>> {
    let mut out = Vec::with_capacity(statements.len());
    for (i, statement) in statements.iter().enumerate() {
        let position = retina_scheduler::analysis::statement::position(statement);
        let unsupported = |detail: String| JobsError::Unsupported { task: task.to_string(), statement: i + 1, position: position.clone(), detail };
        let mut step = step_of(statement, catalog).map_err(unsupported)?;
        let mut predicate = None;
        if let Some(replace) = replaced.iter().find(|r| r.statement == i + 1) {
            let expr = Parser::new(dialect)
                .try_with_sql(&replace.predicate)
                .and_then(|mut p| p.parse_expr())
                .map_err(|e| unsupported(format!("REPLACE WHERE {}: {e}", replace.predicate)))?;
            match &mut step {
                Step::Insert { overwrite, partition, replace_where, .. } if !*overwrite && partition.is_empty() => {
                    *overwrite = true;
                    *replace_where = Some(expr.clone());
                }
                _ => return Err(unsupported("REPLACE WHERE goes with INSERT INTO t REPLACE WHERE … <query> only".to_string())),
            }
            predicate = Some(expr);
        }
        let mut tables = Vec::new();
        let mut note = |name: &ObjectName| {
            if let Some(raw) = normalize(name) {
                let table = catalog.qualify(raw);
                if !tables.contains(&table) {
                    tables.push(table);
                }
            }
            ControlFlow::<()>::Continue(())
        };
        let _ = ast::visit_relations(statement, &mut note);
        if let Some(predicate) = &predicate {
            let _ = ast::visit_relations(predicate, &mut note);
        }
        out.push(PlannedStatement { step, tables, position });
    }
    Ok(out)
}

fn qualified(name: &ObjectName, catalog: &TableCatalog) -> Result<String, String> {
    let raw = normalize(name).ok_or_else(|| format!("table name `{name}` is not a plain identifier"))?;
    let table = catalog.qualify(raw);
    if table.split('.').count() > 2 {
        return Err(format!("table `{table}`: names with a catalog part (catalog.schema.table) are not supported; the lake maps schema.table to a folder"));
    }
    Ok(table)
}

/// The names a column of `table` may be qualified with in the statement.
fn qualifiers_of(table: &str, raw: &ObjectName, alias: Option<&ast::TableAlias>) -> Vec<String> {
    let mut out = vec![table.to_string(), raw.to_string().to_lowercase()];
    if let Some(last) = table.rsplit('.').next() {
        out.push(last.to_string());
    }
    if let Some(alias) = alias {
        out.push(alias.name.value.to_lowercase());
    }
    out.dedup();
    out
}

fn step_of(statement: &Statement, catalog: &TableCatalog) -> Result<Step, String> {
    match statement {
        Statement::Query(query) => Ok(Step::Query { sql: query.to_string() }),
        Statement::CreateTable(create) => create_table(create, catalog),
        Statement::Insert(insert) => insert_step(insert, catalog),
        Statement::Update(update) => {
            let (name, alias) = match &update.table.relation {
                TableFactor::Table { name, alias, .. } if update.table.joins.is_empty() => (name, alias.as_ref()),
                _ => return Err("UPDATE of a join: only UPDATE of one table is supported (write it as MERGE)".to_string()),
            };
            if update.from.is_some() {
                return Err("UPDATE … FROM: write it as MERGE INTO … USING".to_string());
            }
            let table = qualified(name, catalog)?;
            let mut assignments = Vec::new();
            for assignment in &update.assignments {
                assignments.push((assigned_column(&assignment.target)?, assignment.value.clone()));
            }
            Ok(Step::Update { qualifiers: qualifiers_of(&table, name, alias), table, assignments, predicate: update.selection.clone() })
        }
        Statement::Delete(delete) => {
            let from = match &delete.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
            };
            if !delete.tables.is_empty() || from.len() != 1 || delete.using.is_some() {
                return Err("DELETE of several tables or with USING: only DELETE FROM one table is supported".to_string());
            }
            let (name, alias) = match &from[0].relation {
                TableFactor::Table { name, alias, .. } if from[0].joins.is_empty() => (name, alias.as_ref()),
                other => return Err(format!("DELETE from `{other}` (not one table)")),
            };
            let table = qualified(name, catalog)?;
            Ok(Step::Delete { qualifiers: qualifiers_of(&table, name, alias), table, predicate: delete.selection.clone() })
        }
        Statement::Merge(merge) => merge_step(merge, catalog),
        other => {
            let text = other.to_string();
            let head: String = text.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
            Err(format!("`{head} …` is not a statement the executor runs (it runs SELECT, CREATE TABLE [AS SELECT], INSERT [OVERWRITE], UPDATE, DELETE and MERGE INTO; it never drops or alters a table)"))
        }
    }
}

fn assigned_column(target: &AssignmentTarget) -> Result<String, String> {
    match target {
        AssignmentTarget::ColumnName(name) => name.0.last().map(|part| part.to_string().trim_matches('`').trim_matches('"').to_lowercase()).ok_or_else(|| "an empty column name".to_string()),
        AssignmentTarget::Tuple(_) => Err("SET (a, b) = …: assign one column at a time".to_string()),
    }
}

fn create_table(create: &ast::CreateTable, catalog: &TableCatalog) -> Result<Step, String> {
    let table = qualified(&create.name, catalog)?;
    let mut partition_columns = Vec::new();
    let mut partition_defs: Vec<&ColumnDef> = Vec::new();
    if let HiveDistributionStyle::PARTITIONED { columns } = &create.hive_distribution {
        for column in columns {
            partition_columns.push(column.name.value.to_lowercase());
            partition_defs.push(column);
        }
    }
    let schema = if create.columns.is_empty() {
        None
    } else {
        let mut fields = Vec::new();
        for column in create.columns.iter().chain(partition_defs.iter().copied().filter(|d| !create.columns.iter().any(|c| c.name.value.eq_ignore_ascii_case(&d.name.value)))) {
            let data_type = arrow_type(&column.data_type).map_err(|detail| format!("column {}: {detail}", column.name))?;
            let not_null = column.options.iter().any(|o| matches!(o.option, ast::ColumnOption::NotNull));
            fields.push(Field::new(column.name.value.to_lowercase(), data_type, !not_null));
        }
        Some(Schema::new(fields))
    };
    if schema.is_none() && create.query.is_none() {
        return Err(format!("CREATE TABLE {table} has neither columns nor AS SELECT"));
    }
    if let Some(schema) = &schema {
        for column in &partition_columns {
            if schema.field_with_name(column).is_err() {
                return Err(format!("CREATE TABLE {table}: partition column {column} is not a column of the table"));
            }
        }
    }
    Ok(Step::CreateTable {
        table,
        schema,
        partition_columns,
        if_not_exists: create.if_not_exists,
        or_replace: create.or_replace,
        query: create.query.as_ref().map(|q| q.to_string()),
    })
}

/// SQL column types (Spark/Databricks spelling) as Arrow types.
pub fn arrow_type(data_type: &ast::DataType) -> Result<DataType, String> {
    use ast::DataType as S;
    Ok(match data_type {
        S::String(_) | S::Text | S::Varchar(_) | S::Char(_) | S::CharVarying(_) | S::Character(_) | S::CharacterVarying(_) => DataType::Utf8,
        S::Int(_) | S::Integer(_) | S::Int4(_) => DataType::Int32,
        S::BigInt(_) | S::Int8(_) | S::Int64 => DataType::Int64,
        S::SmallInt(_) | S::Int2(_) => DataType::Int16,
        S::TinyInt(_) => DataType::Int8,
        S::Double(_) | S::DoublePrecision | S::Float8 | S::Float64 => DataType::Float64,
        S::Float(_) | S::Real | S::Float4 | S::Float32 => DataType::Float32,
        S::Boolean | S::Bool => DataType::Boolean,
        S::Date => DataType::Date32,
        S::Timestamp(_, _) | S::TimestampNtz(_) | S::Datetime(_) => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        S::Decimal(info) | S::Numeric(info) | S::Dec(info) => match info {
            ast::ExactNumberInfo::PrecisionAndScale(p, s) => DataType::Decimal128(*p as u8, *s as i8),
            ast::ExactNumberInfo::Precision(p) => DataType::Decimal128(*p as u8, 0),
            ast::ExactNumberInfo::None => DataType::Decimal128(10, 0),
        },
        other => return Err(format!("type {other} is not supported (STRING, INT, BIGINT, SMALLINT, TINYINT, DOUBLE, FLOAT, BOOLEAN, DATE, TIMESTAMP, DECIMAL(p,s))")),
    })
}

fn insert_step(insert: &ast::Insert, catalog: &TableCatalog) -> Result<Step, String> {
    let name = match &insert.table {
        TableObject::TableName(name) => name,
        other => return Err(format!("INSERT into `{other}` (not a table name)")),
    };
    let table = qualified(name, catalog)?;
    let query = insert.source.as_ref().ok_or_else(|| format!("INSERT into {table} without a query or VALUES"))?;
    let mut partition = Vec::new();
    for expr in insert.partitioned.iter().flatten() {
        match expr {
            Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } => match &**left {
                Expr::Identifier(column) => partition.push((column.value.to_lowercase(), (**right).clone())),
                other => return Err(format!("PARTITION ({other} = …): name a partition column")),
            },
            other => return Err(format!("PARTITION ({other}): dynamic partitions are not supported; give each partition column a value (PARTITION (c = 'v'))")),
        }
    }
    let columns = insert.columns.iter().map(|c| c.to_string().trim_matches('`').to_lowercase()).collect();
    Ok(Step::Insert { table, overwrite: insert.overwrite, partition, replace_where: None, columns, query: query.to_string() })
}

fn merge_step(merge: &ast::Merge, catalog: &TableCatalog) -> Result<Step, String> {
    let (name, alias) = match &merge.table {
        TableFactor::Table { name, alias, .. } => (name, alias.as_ref()),
        other => return Err(format!("MERGE into `{other}` (not a table)")),
    };
    let table = qualified(name, catalog)?;
    let target_alias = alias.map(|a| a.name.value.to_lowercase()).unwrap_or_else(|| table.rsplit('.').next().unwrap_or(&table).to_string());
    let (source, source_alias) = match &merge.source {
        TableFactor::Table { name, alias, .. } => {
            let source = qualified(name, catalog)?;
            let alias = alias.as_ref().map(|a| a.name.value.to_lowercase()).unwrap_or_else(|| source.rsplit('.').next().unwrap_or(&source).to_string());
            (MergeSource::Table(source), alias)
        }
        TableFactor::Derived { subquery, alias, .. } => {
            let alias = alias.as_ref().map(|a| a.name.value.to_lowercase()).ok_or_else(|| "MERGE … USING (subquery) needs an alias (AS s)".to_string())?;
            (MergeSource::Query(subquery.to_string()), alias)
        }
        other => return Err(format!("MERGE … USING `{other}`: use a table or a subquery")),
    };
    if source_alias == target_alias {
        return Err(format!("MERGE: source and target are both called {target_alias}; give one an alias"));
    }
    let mut clauses = Vec::new();
    for clause in &merge.clauses {
        let action = match &clause.action {
            MergeAction::Update(update) => {
                let mut assignments = Vec::new();
                for assignment in &update.assignments {
                    assignments.push((assigned_column(&assignment.target)?, assignment.value.clone()));
                }
                MergeStep::Update(assignments)
            }
            MergeAction::Delete { .. } => MergeStep::Delete,
            MergeAction::Insert(insert) => {
                let values = match &insert.kind {
                    MergeInsertKind::Values(values) if values.rows.len() == 1 => values.rows[0].content.clone(),
                    other => return Err(format!("MERGE … INSERT {other}: give one VALUES row")),
                };
                let columns: Vec<String> = insert.columns.iter().map(|c| c.0.last().map(|p| p.to_string().to_lowercase()).unwrap_or_default()).collect();
                if columns.is_empty() || columns.len() != values.len() {
                    return Err(format!("MERGE … INSERT: name the columns and give one value each ({} columns, {} values)", columns.len(), values.len()));
                }
                MergeStep::Insert { columns, values }
            }
        };
        clauses.push(MergeClause { kind: clause.clause_kind.clone(), predicate: clause.predicate.clone(), action });
    }
    if clauses.is_empty() {
        return Err("MERGE without WHEN clauses".to_string());
    }
    Ok(Step::Merge { target_qualifiers: qualifiers_of(&table, name, alias), table, target_alias, source, source_alias, on: (*merge.on).clone(), clauses })
}
