//! One statement through delta-rs: its target loaded at the latest version (the
//! snapshot its commit is checked against), the tables it reads registered in a
//! DataFusion session, then delta-rs's own operation, which commits through its
//! conflict checker.

use std::sync::Arc;

use arrow_array::RecordBatch;
use deltalake_core::datafusion::common::Column;
use deltalake_core::datafusion::logical_expr::{cast, lit, Expr as DfExpr};
use deltalake_core::datafusion::prelude::{DataFrame, SessionContext};
use deltalake_core::protocol::SaveMode;
use deltalake_core::{DeltaTable, DeltaTableError};
use sqlparser::ast::{self, Expr, MergeClauseKind};

use crate::attempt::AttemptWrites;
use crate::error::{JobsError, Result};
use crate::lake::Lake;
use crate::recording_store::RecordingStore;
use crate::statement::{MergeSource, MergeStep, PlannedStatement, Step};

/// Where a statement runs: its task, number and default schema.
#[derive(Debug, Clone, Copy)]
pub struct StatementContext<'a> {
    pub task: &'a str,
    pub number: usize,
    pub default_schema: Option<&'a str>,
}

impl StatementContext<'_> {
    fn delta(&self, table: &str, source: DeltaTableError) -> JobsError {
        JobsError::Delta { task: self.task.to_string(), statement: self.number, table: table.to_string(), source }
    }

    fn query(&self, source: deltalake_core::datafusion::error::DataFusionError) -> JobsError {
        JobsError::Query { task: self.task.to_string(), statement: self.number, source }
    }

    fn mismatch(&self, table: &str, detail: String) -> JobsError {
        JobsError::Mismatch { task: self.task.to_string(), statement: self.number, table: table.to_string(), detail }
    }
}

/// Runs one statement as part of an attempt; returns the rows it wrote (inserted,
/// updated or deleted). The versions it commits are noted in `writes`; when its
/// commit loses to a concurrent one, the files it wrote are deleted, so a lost
/// statement leaves no version and no file.
pub async fn execute(lake: &Lake, at: StatementContext<'_>, planned: &PlannedStatement, writes: &mut AttemptWrites) -> Result<u64> {
    let mark = writes.mark();
    let result = run_step(lake, at, planned, writes.recorder()).await;
    let lost_commit = result.as_ref().err().and_then(JobsError::delta).and_then(crate::conflict::ConflictKind::of).is_some();
    writes.statement_ended(lake, mark, at.number, planned.step.target(), lost_commit).await;
    result
}

async fn run_step(lake: &Lake, at: StatementContext<'_>, planned: &PlannedStatement, recorder: &Arc<RecordingStore>) -> Result<u64> {
    let ctx = lake.session(at.default_schema);
    let target = planned.step.target();
    // The target first: its version is the snapshot delta-rs checks the commit against.
    let loaded_target = match target {
        Some(name) => lake.load_through(name, Some(recorder)).await.map_err(|e| at.delta(name, e))?,
        None => None,
    };
    let mut missing = Vec::new();
    for name in &planned.tables {
        if Some(name.as_str()) == target {
            if let Some(table) = &loaded_target {
                lake.register(&ctx, name, table).await.map_err(|e| at.delta(name, e))?;
            }
            continue;
        }
        match lake.load(name).await.map_err(|e| at.delta(name, e))? {
            Some(table) => lake.register(&ctx, name, &table).await.map_err(|e| at.delta(name, e))?,
            // A table function (generate_series) or a CTE, or a missing table: DataFusion
            // tells which when it plans.
            None => missing.push(name.clone()),
        }
    }
    hold_before_write(at, target.is_some()).await;
    let result = write_step(lake, at, planned, recorder, &ctx, loaded_target).await;
    match result {
        // DataFusion's "table not found", said as ours when it is a table the lake lacks.
        Err(JobsError::Query { source, .. }) if source.to_string().contains("not found") => {
            let text = source.to_string();
            match missing.iter().find(|m| text.contains(m.rsplit('.').next().unwrap_or(m))) {
                Some(table) => Err(JobsError::MissingTable { task: at.task.to_string(), statement: at.number, table: table.clone(), lake: lake.root().to_string() }),
                None => Err(at.query(source)),
            }
        }
        other => other,
    }
}

async fn write_step(
    lake: &Lake,
    at: StatementContext<'_>,
    planned: &PlannedStatement,
    recorder: &Arc<RecordingStore>,
    ctx: &SessionContext,
    loaded_target: Option<DeltaTable>,
) -> Result<u64> {
    let require = |table: Option<DeltaTable>, name: &str| {
        table.ok_or_else(|| JobsError::MissingTable { task: at.task.to_string(), statement: at.number, table: name.to_string(), lake: lake.root().to_string() })
    };
    match &planned.step {
        Step::Query { sql } => {
            // Read to the end (a check fails here), written nowhere.
            ctx.sql(sql).await.map_err(|e| at.query(e))?.collect().await.map_err(|e| at.query(e))?;
            Ok(0)
        }
        Step::CreateTable { table, schema, partition_columns, if_not_exists, or_replace, query } => {
            if loaded_target.is_some() && *if_not_exists {
                return Ok(0);
            }
            let (batches, schema) = match (query, schema) {
                (Some(sql), _) => {
                    let frame = ctx.sql(sql).await.map_err(|e| at.query(e))?;
                    let schema = Arc::new(frame.schema().as_arrow().clone());
                    (frame.collect().await.map_err(|e| at.query(e))?, schema)
                }
                (None, Some(schema)) => (Vec::new(), Arc::new(schema.clone())),
                (None, None) => return Err(at.mismatch(table, "no columns and no query".to_string())),
            };
            let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
            // An empty batch carries the schema when the table starts empty.
            let batches = if batches.is_empty() { vec![RecordBatch::new_empty(schema)] } else { batches };
            let handle = match loaded_target {
                Some(existing) => existing,
                None => lake.unloaded(lake.table_url(table)?, Some(recorder)).map_err(|e| at.delta(table, e))?,
            };
            let mode = if *or_replace { SaveMode::Overwrite } else { SaveMode::ErrorIfExists };
            let mut write = handle.write(batches).with_save_mode(mode).with_partition_columns(partition_columns.clone());
            if *or_replace {
                write = write.with_schema_mode(deltalake_core::operations::write::SchemaMode::Overwrite);
            }
            write.await.map_err(|e| at.delta(table, e))?;
            Ok(rows)
        }
        Step::Insert { table, overwrite, partition, replace_where, columns, query } => {
            let target_table = require(loaded_target, table)?;
            let frame = ctx.sql(query).await.map_err(|e| at.query(e))?;
            let frame = shape_for(&target_table, frame, partition, columns, at, table)?;
            let batches = frame.collect().await.map_err(|e| at.query(e))?;
            let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
            let mut write = target_table.write(batches).with_session_state(Arc::new(ctx.state()));
            if *overwrite {
                write = write.with_save_mode(SaveMode::Overwrite);
                if let Some(predicate) = replace_where {
                    write = write.with_replace_where(render(ctx, predicate, std::slice::from_ref(table), at).await?);
                } else if !partition.is_empty() {
                    let predicate: Vec<String> = partition.iter().map(|(c, v)| format!("{c} = {v}")).collect();
                    write = write.with_replace_where(predicate.join(" AND "));
                }
            } else {
                write = write.with_save_mode(SaveMode::Append);
            }
            write.await.map_err(|e| at.delta(table, e))?;
            Ok(rows)
        }
        Step::Update { table, qualifiers, assignments, predicate } => {
            let target_table = require(loaded_target, table)?;
            let mut update = target_table.update().with_session_state(Arc::new(ctx.state()));
            if let Some(predicate) = predicate {
                update = update.with_predicate(render(&ctx, predicate, qualifiers, at).await?);
            }
            for (column, value) in assignments {
                update = update.with_update(column.as_str(), render(&ctx, value, qualifiers, at).await?);
            }
            let (_, metrics) = update.await.map_err(|e| at.delta(table, e))?;
            Ok(metrics.num_updated_rows as u64)
        }
        Step::Delete { table, qualifiers, predicate } => {
            let target_table = require(loaded_target, table)?;
            let mut delete = target_table.delete().with_session_state(Arc::new(ctx.state()));
            if let Some(predicate) = predicate {
                delete = delete.with_predicate(render(&ctx, predicate, qualifiers, at).await?);
            }
            let (_, metrics) = delete.await.map_err(|e| at.delta(table, e))?;
            Ok(metrics.num_deleted_rows.unwrap_or_default() as u64)
        }
        Step::Merge { table, target_alias, target_qualifiers, source, source_alias, on, clauses } => {
            let target_table = require(loaded_target, table)?;
            let source_frame = match source {
                MergeSource::Table(name) => ctx.table(name.as_str()).await.map_err(|e| at.query(e))?,
                MergeSource::Query(sql) => ctx.sql(sql).await.map_err(|e| at.query(e))?,
            };
            // Target columns may be written with the table's full name; delta-rs knows the alias.
            let retarget = |expr: &Expr| requalify(expr, target_qualifiers, target_alias);
            let on = render(&ctx, &retarget(on), &[], at).await?;
            let mut merge = target_table
                .merge(source_frame, on)
                .with_source_alias(source_alias.as_str())
                .with_target_alias(target_alias.as_str())
                .with_session_state(Arc::new(ctx.state()));
            for clause in clauses {
                let predicate = match &clause.predicate {
                    Some(p) => Some(render(&ctx, &retarget(p), &[], at).await?),
                    None => None,
                };
                let delta = |e| at.delta(table, e);
                merge = match (&clause.kind, &clause.action) {
                    (MergeClauseKind::Matched, MergeStep::Update(assignments)) => {
                        let sets = render_all(&ctx, assignments.iter().map(|(c, e)| (c.clone(), retarget(e))), at).await?;
                        merge
                            .when_matched_update(|mut u| {
                                if let Some(p) = predicate {
                                    u = u.predicate(p);
                                }
                                sets.into_iter().fold(u, |u, (c, e)| u.update(c.as_str(), e))
                            })
                            .map_err(delta)?
                    }
                    (MergeClauseKind::Matched, MergeStep::Delete) => merge
                        .when_matched_delete(|mut d| {
                            if let Some(p) = predicate {
                                d = d.predicate(p);
                            }
                            d
                        })
                        .map_err(delta)?,
                    (MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget, MergeStep::Insert { columns, values }) => {
                        let sets = render_all(&ctx, columns.iter().cloned().zip(values.iter().map(&retarget)), at).await?;
                        merge
                            .when_not_matched_insert(|mut i| {
                                if let Some(p) = predicate {
                                    i = i.predicate(p);
                                }
                                sets.into_iter().fold(i, |i, (c, e)| i.set(c.as_str(), e))
                            })
                            .map_err(delta)?
                    }
                    (MergeClauseKind::NotMatchedBySource, MergeStep::Update(assignments)) => {
                        let sets = render_all(&ctx, assignments.iter().map(|(c, e)| (c.clone(), retarget(e))), at).await?;
                        merge
                            .when_not_matched_by_source_update(|mut u| {
                                if let Some(p) = predicate {
                                    u = u.predicate(p);
                                }
                                sets.into_iter().fold(u, |u, (c, e)| u.update(c.as_str(), e))
                            })
                            .map_err(delta)?
                    }
                    (MergeClauseKind::NotMatchedBySource, MergeStep::Delete) => merge
                        .when_not_matched_by_source_delete(|mut d| {
                            if let Some(p) = predicate {
                                d = d.predicate(p);
                            }
                            d
                        })
                        .map_err(delta)?,
                    (kind, _) => return Err(at.mismatch(table, format!("MERGE: WHEN {kind} cannot take that action"))),
                };
            }
            let (_, metrics) = merge.await.map_err(|e| at.delta(table, e))?;
            Ok((metrics.num_target_rows_inserted + metrics.num_target_rows_updated + metrics.num_target_rows_deleted) as u64)
        }
    }
}

/// The query's columns as the target's: static partition values added, the
/// rest by position (Spark's INSERT), or by the listed columns (others NULL);
/// each cast to the target column's type.
fn shape_for(target: &DeltaTable, frame: DataFrame, partition: &[(String, Expr)], columns: &[String], at: StatementContext<'_>, table: &str) -> Result<DataFrame> {
    let schema = target.snapshot().map_err(|e| at.delta(table, e))?.snapshot().arrow_schema();
    let produced: Vec<DfExpr> = (0..frame.schema().fields().len()).map(|i| DfExpr::Column(Column::from(frame.schema().qualified_field(i)))).collect();
    let static_value = |name: &str| partition.iter().find(|(c, _)| c == name).map(|(_, v)| v);
    let mut by_name = std::collections::HashMap::new();
    if columns.is_empty() {
        let dynamic: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).filter(|n| static_value(n).is_none()).collect();
        if dynamic.len() != produced.len() {
            return Err(at.mismatch(table, format!("the query gives {} columns, the table takes {} ({})", produced.len(), dynamic.len(), dynamic.join(", "))));
        }
        by_name.extend(dynamic.into_iter().zip(produced));
    } else {
        if columns.len() != produced.len() {
            return Err(at.mismatch(table, format!("{} columns are listed, the query gives {}", columns.len(), produced.len())));
        }
        for (column, expr) in columns.iter().zip(produced) {
            if schema.field_with_name(column).is_err() {
                return Err(at.mismatch(table, format!("no column {column}")));
            }
            by_name.insert(column.as_str(), expr);
        }
    }
    let mut select = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let value = match (static_value(field.name()), by_name.remove(field.name().as_str())) {
            (Some(literal), _) => literal_value(literal).ok_or_else(|| at.mismatch(table, format!("PARTITION ({} = {literal}): give a literal", field.name())))?,
            (None, Some(expr)) => expr,
            (None, None) => lit(deltalake_core::datafusion::scalar::ScalarValue::Null),
        };
        select.push(cast(value, field.data_type().clone()).alias(field.name()));
    }
    frame.select(select).map_err(|e| at.query(e))
}

/// A SQL literal as a DataFusion value.
fn literal_value(expr: &Expr) -> Option<DfExpr> {
    match expr {
        Expr::Value(value) => match &value.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Some(lit(s.clone())),
            ast::Value::Number(n, _) => n.parse::<i64>().map(lit).ok().or_else(|| n.parse::<f64>().map(lit).ok()),
            ast::Value::Boolean(b) => Some(lit(*b)),
            ast::Value::Null => Some(lit(deltalake_core::datafusion::scalar::ScalarValue::Null)),
            _ => None,
        },
        _ => None,
    }
}

/// `expr` as delta-rs parses it: columns qualified by one of `qualifiers` lose
/// the qualifier; uncorrelated subqueries are replaced by their values.
async fn render(ctx: &SessionContext, expr: &Expr, qualifiers: &[String], at: StatementContext<'_>) -> Result<String> {
    let mut expr = expr.clone();
    strip_qualifiers(&mut expr, qualifiers);
    substitute_subqueries(ctx, &mut expr, at)?;
    Ok(expr.to_string())
}

async fn render_all(ctx: &SessionContext, pairs: impl Iterator<Item = (String, Expr)>, at: StatementContext<'_>) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (column, expr) in pairs {
        out.push((column, render(ctx, &expr, &[], at).await?));
    }
    Ok(out)
}

fn strip_qualifiers(expr: &mut Expr, qualifiers: &[String]) {
    if qualifiers.is_empty() {
        return;
    }
    let _ = ast::visit_expressions_mut(expr, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() >= 2 {
                let prefix: Vec<String> = parts[..parts.len() - 1].iter().map(|p| p.value.to_lowercase()).collect();
                if qualifiers.contains(&prefix.join(".")) {
                    *e = Expr::Identifier(parts[parts.len() - 1].clone());
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// Columns qualified by the target's full name, as `alias.column`.
fn requalify(expr: &Expr, qualifiers: &[String], alias: &str) -> Expr {
    let mut expr = expr.clone();
    let _ = ast::visit_expressions_mut(&mut expr, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() > 2 {
                let prefix: Vec<String> = parts[..parts.len() - 1].iter().map(|p| p.value.to_lowercase()).collect();
                if qualifiers.contains(&prefix.join(".")) {
                    *e = Expr::CompoundIdentifier(vec![ast::Ident::new(alias), parts[parts.len() - 1].clone()]);
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    expr
}

/// Replaces `x IN (SELECT …)`, `EXISTS (SELECT …)` and scalar subqueries by their
/// values: delta-rs's predicates are expressions over the target's rows, without
/// subqueries. A correlated subquery fails to plan, naming the statement.
fn substitute_subqueries(ctx: &SessionContext, expr: &mut Expr, at: StatementContext<'_>) -> Result<()> {
    let mut failure = None;
    let _ = ast::visit_expressions_mut(expr, |e| {
        let replaced = match e {
            Expr::InSubquery { expr: left, subquery, negated } => values_of(ctx, &subquery.to_string()).map(|values| {
                if values.is_empty() {
                    Expr::Value(ast::Value::Boolean(*negated).into())
                } else {
                    Expr::InList { expr: left.clone(), list: values, negated: *negated }
                }
            }),
            Expr::Exists { subquery, negated } => {
                values_of(ctx, &format!("SELECT 1 FROM ({subquery}) LIMIT 1")).map(|v| Expr::Value(ast::Value::Boolean(v.is_empty() == *negated).into()))
            }
            Expr::Subquery(subquery) => values_of(ctx, &subquery.to_string()).and_then(|values| match values.len() {
                0 => Ok(Expr::Value(ast::Value::Null.into())),
                1 => Ok(values.into_iter().next().unwrap_or(Expr::Value(ast::Value::Null.into()))),
                n => Err(deltalake_core::datafusion::error::DataFusionError::Plan(format!("a scalar subquery returned {n} rows: {subquery}"))),
            }),
            _ => return std::ops::ControlFlow::Continue(()),
        };
        match replaced {
            Ok(value) => {
                *e = value;
                std::ops::ControlFlow::Continue(())
            }
            Err(error) => {
                failure = Some(error);
                std::ops::ControlFlow::Break(())
            }
        }
    });
    match failure {
        Some(error) => Err(at.query(error)),
        None => Ok(()),
    }
}

/// The first column of `sql`'s rows as SQL literals. Runs on the current Tokio
/// runtime from inside sqlparser's synchronous visitor.
fn values_of(ctx: &SessionContext, sql: &str) -> Result<Vec<Expr>, deltalake_core::datafusion::error::DataFusionError> {
    let batches = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(async { ctx.sql(sql).await?.collect().await }))?;
    let mut out = Vec::new();
    for batch in &batches {
        if batch.num_columns() == 0 {
            continue;
        }
        let column = batch.column(0);
        for row in 0..batch.num_rows() {
            out.push(sql_literal(column.as_ref(), row)?);
        }
    }
    Ok(out)
}

fn sql_literal(array: &dyn arrow_array::Array, row: usize) -> Result<Expr, deltalake_core::datafusion::error::DataFusionError> {
    use arrow_schema::DataType as T;
    if array.is_null(row) {
        return Ok(Expr::Value(ast::Value::Null.into()));
    }
    let text = deltalake_core::arrow::util::display::array_value_to_string(array, row)?;
    Ok(match array.data_type() {
        T::Utf8 | T::LargeUtf8 | T::Utf8View => Expr::Value(ast::Value::SingleQuotedString(text).into()),
        T::Boolean => Expr::Value(ast::Value::Boolean(text == "true").into()),
        T::Date32 | T::Date64 => typed("DATE", text),
        T::Timestamp(_, _) => typed("TIMESTAMP", text),
        _ => Expr::Value(ast::Value::Number(text, false).into()),
    })
}

fn typed(name: &str, text: String) -> Expr {
    let sql = format!("{name} '{}'", text.replace('T', " ").trim_end_matches('Z'));
    let dialect = sqlparser::dialect::GenericDialect {};
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .unwrap_or(Expr::Value(ast::Value::SingleQuotedString(text).into()))
}

/// Test hook: holds a statement after its snapshot is taken, so that the tests
/// make conflicting tasks overlap on purpose (`jobs::hold-before-write`). Its
/// value is a comma-separated list of `MS` (every writing statement) and
/// `TASK#N=MS` (statement N of the task whose key ends with TASK, writing or not).
async fn hold_before_write(at: StatementContext<'_>, writes: bool) {
    #[cfg(feature = "failpoints")]
    {
        let here = format!("{}#{}", at.task, at.number);
        let hold = fail::eval("jobs::hold-before-write", |value| {
            let value = value.unwrap_or_default();
            let mut chosen = None;
            for entry in value.split(',').map(str::trim) {
                match entry.split_once('=') {
                    Some((selector, ms)) if here.ends_with(selector) => return ms.parse::<u64>().ok(),
                    Some(_) => {}
                    None if writes => chosen = entry.parse::<u64>().ok(),
                    None => {}
                }
            }
            chosen
        });
        if let Some(Some(ms)) = hold {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = (at, writes);
}
