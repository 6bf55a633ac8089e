//! Export of a snapshot's visible rows to plain Parquet files, and a plain DataFusion
//! context over such files. This is the static reference the correctness tests and
//! `retina bench query` compare Retina against: same rows, no Retina layer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use retina_core::Engine;

use crate::error::{QueryError, QueryResult};
use crate::snapshot::QuerySnapshot;
use crate::system::split_table_name;

/// Rows per row group of exported files: the size of a Retina data file, so both
/// sides scan the same number of row groups.
const ROW_GROUP_ROWS: usize = 16 * 4096;

/// One exported table: its engine name and its file.
#[derive(Clone, Debug)]
pub struct ExportedTable {
    pub name: String,
    pub path: PathBuf,
    pub rows: u64,
}

/// Writes every table's rows visible at `snapshot` to `<dir>/<table>.parquet`.
pub fn export_snapshot(engine: &Engine, snapshot: &QuerySnapshot, dir: &Path) -> QueryResult<Vec<ExportedTable>> {
    let io = |e: std::io::Error| QueryError::Core(retina_core::CoreError::Storage(format!("export to {}: {e}", dir.display())));
    std::fs::create_dir_all(dir).map_err(io)?;
    let guard = snapshot.guard();
    let mut exported = Vec::new();
    for table in engine.tables() {
        let batches = engine.scan(table.id(), &guard, None)?;
        let path = dir.join(format!("{}.parquet", table.name()));
        let file = File::create(&path).map_err(io)?;
        let properties =
            WriterProperties::builder().set_compression(Compression::SNAPPY).set_max_row_group_row_count(Some(ROW_GROUP_ROWS)).build();
        let parquet = |e: datafusion::parquet::errors::ParquetError| QueryError::DataFusion(DataFusionError::from(e));
        let mut writer = ArrowWriter::try_new(file, Arc::clone(table.schema().columns()), Some(properties)).map_err(parquet)?;
        let mut rows = 0;
        for batch in &batches {
            rows += batch.num_rows() as u64;
            writer.write(batch).map_err(parquet)?;
        }
        writer.close().map_err(parquet)?;
        exported.push(ExportedTable { name: table.name().to_string(), path, rows });
    }
    Ok(exported)
}

/// A plain DataFusion context with each exported table registered under the same
/// SQL name as in Retina (`chbench.stock` is table `stock` in schema `chbench`).
pub async fn plain_context(tables: &[ExportedTable], target_partitions: usize) -> QueryResult<SessionContext> {
    // Read strings as Utf8 (not Utf8View), the type Retina's tables have, so both sides
    // produce the same result schema.
    let config = crate::session::with_postgres_literals(SessionConfig::new())
        .with_target_partitions(target_partitions.max(1))
        .set_bool("datafusion.execution.parquet.schema_force_view_types", false);
    let state = SessionStateBuilder::new().with_config(config).with_default_features();
    let context = SessionContext::new_with_state(crate::session::with_postgres_rules(state).build());
    let mut schemas: Vec<&str> = tables.iter().map(|t| split_table_name(&t.name).0).collect();
    schemas.sort_unstable();
    schemas.dedup();
    for schema in schemas {
        context.sql(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")).await?.collect().await?;
    }
    for table in tables {
        let (schema, name) = split_table_name(&table.name);
        let path = table.path.to_str().ok_or_else(|| {
            QueryError::Core(retina_core::CoreError::Storage(format!("{} is not UTF-8", table.path.display())))
        })?;
        context
            .register_parquet(format!("\"{schema}\".\"{name}\""), path, ParquetReadOptions::default())
            .await?;
    }
    Ok(context)
}
