//! The lake: a root under which table `a.b` is the Delta table in folder `a/b`,
//! and the DataFusion sessions statements run in.

use std::sync::Arc;

use deltalake_core::datafusion::catalog::MemorySchemaProvider;
use deltalake_core::datafusion::execution::session_state::SessionStateBuilder;
use deltalake_core::datafusion::prelude::{SessionConfig, SessionContext};
use deltalake_core::{DeltaTable, DeltaTableBuilder, DeltaTableError, ObjectStore};
use url::Url;

use crate::error::{JobsError, Result};
use crate::recording_store::RecordingStore;

/// A lake root. Invariant: `root` ends with `/`, so joining a relative table
/// folder keeps every segment.
#[derive(Debug, Clone)]
pub struct Lake {
    root: Url,
    store: Arc<dyn ObjectStore>,
    mirror: Option<Arc<Mirror>>,
}

/// A Retina data dir's published cut, read once: its tables are readable (never
/// writable) by name, each at the Delta version the cut lists, so every statement of
/// a run sees the same consistent cut of the source database.
#[derive(Debug)]
pub struct Mirror {
    /// The Retina snapshot the cut is.
    pub ts: u64,
    /// Table name → (Delta table URL, version).
    tables: std::collections::HashMap<String, (Url, u64)>,
}

#[derive(serde::Deserialize)]
struct PublishedCut {
    ts: u64,
    tables: Vec<PublishedTable>,
}

#[derive(serde::Deserialize)]
struct PublishedTable {
    table: String,
    delta_path: String,
    delta_version: u64,
}

impl Mirror {
    /// The latest cut of the Retina data dir `dir` (`_retina/published/latest.json`).
    pub fn open(dir: &str) -> Result<Self> {
        let error = |detail: String| JobsError::Lake { lake: dir.to_string(), detail };
        let root = std::path::Path::new(dir).canonicalize().map_err(|e| error(e.to_string()))?;
        let latest = root.join("_retina/published/latest.json");
        let text = std::fs::read_to_string(&latest)
            .map_err(|e| error(format!("no published cut at {} ({e}): publish it with retina serve/ingest --publish delta", latest.display())))?;
        let cut: PublishedCut = serde_json::from_str(&text).map_err(|e| error(format!("{}: {e}", latest.display())))?;
        let root = Url::from_directory_path(&root).map_err(|()| error("not an absolute path".to_string()))?;
        let mut tables = std::collections::HashMap::new();
        for table in cut.tables {
            let url = root.join(&format!("{}/", table.delta_path)).map_err(|e| error(format!("table {}: {e}", table.table)))?;
            tables.insert(table.table.to_lowercase(), (url, table.delta_version));
        }
        Ok(Self { ts: cut.ts, tables })
    }

    /// Whether `name` is a table of the cut.
    pub fn contains(&self, name: &str) -> bool {
        self.tables.contains_key(name)
    }

    /// The cut's table names.
    pub fn table_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tables.keys().map(String::as_str).collect();
        names.sort();
        names
    }
}

impl Lake {
    /// A local directory (created if missing) or a `file://` URL.
    pub fn open(location: &str) -> Result<Self> {
        let lake_error = |detail: String| JobsError::Lake { lake: location.to_string(), detail };
        let path = match Url::parse(location) {
            Ok(url) if url.scheme() == "file" => url.to_file_path().map_err(|()| lake_error("not a local path".to_string()))?,
            Ok(url) if url.scheme().len() > 1 => {
                return Err(lake_error(format!(
                    "{}:// lakes are not supported by the executor yet (delta-rs needs its per-cloud crate for them); use a local directory",
                    url.scheme()
                )))
            }
            _ => std::path::PathBuf::from(location),
        };
        std::fs::create_dir_all(&path).map_err(|e| lake_error(format!("cannot create it: {e}")))?;
        let path = path.canonicalize().map_err(|e| lake_error(e.to_string()))?;
        let root = Url::from_directory_path(&path).map_err(|()| lake_error("not an absolute path".to_string()))?;
        Ok(Self { root, store: Arc::new(object_store::local::LocalFileSystem::new()), mirror: None })
    }

    /// The lake with a published mirror's tables readable beside its own.
    pub fn with_mirror(mut self, mirror: Mirror) -> Self {
        self.mirror = Some(Arc::new(mirror));
        self
    }

    /// The mirror, if the lake reads one.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.mirror.as_deref()
    }

    /// The lake's root URL (ends with `/`).
    pub fn root(&self) -> &Url {
        &self.root
    }

    /// Where table `name` (`schema.table`) lives.
    pub fn table_url(&self, name: &str) -> Result<Url> {
        let folder: Vec<&str> = name.split('.').collect();
        self.root.join(&format!("{}/", folder.join("/"))).map_err(|e| JobsError::Lake { lake: self.root.to_string(), detail: format!("table {name}: {e}") })
    }

    /// The table at its latest version, through `store` (None: no Delta table there).
    pub(crate) async fn load_through(&self, name: &str, store: Option<&Arc<RecordingStore>>) -> Result<Option<DeltaTable>, DeltaTableError> {
        let url = self.table_url(name).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        // delta-rs calls a missing folder an invalid location; here it is no table yet.
        if url.to_file_path().is_ok_and(|path| !path.join("_delta_log").exists()) {
            return Ok(None);
        }
        let table = self.unloaded(url, store)?;
        let mut table = table;
        match table.load().await {
            Ok(()) => Ok(Some(table)),
            Err(DeltaTableError::NotATable(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// A handle on the table's location, not loaded (to create a table there: its
    /// folder is made first).
    pub(crate) fn unloaded(&self, url: Url, store: Option<&Arc<RecordingStore>>) -> Result<DeltaTable, DeltaTableError> {
        if let Ok(path) = url.to_file_path() {
            std::fs::create_dir_all(&path).map_err(|e| DeltaTableError::Generic(format!("creating {}: {e}", path.display())))?;
        }
        let builder = DeltaTableBuilder::from_url(url.clone())?;
        let builder = match store {
            Some(store) => builder.with_storage_backend(Arc::clone(store) as Arc<dyn ObjectStore>, url),
            None => builder.with_storage_backend(Arc::clone(&self.store), url),
        };
        builder.build()
    }

    /// The table at its latest version, or a mirror table at the cut's version
    /// (None: it does not exist).
    pub async fn load(&self, name: &str) -> Result<Option<DeltaTable>, DeltaTableError> {
        if let Some((url, version)) = self.mirror.as_ref().and_then(|m| m.tables.get(name)) {
            let mut table = DeltaTableBuilder::from_url(url.clone())?.build()?;
            table.load_version(*version).await?;
            return Ok(Some(table));
        }
        self.load_through(name, None).await
    }

    /// The partition columns the table's own metadata declares (none if it does not exist).
    pub async fn partition_columns(&self, name: &str) -> Result<Vec<String>, DeltaTableError> {
        Ok(match self.load(name).await? {
            Some(table) => table.snapshot()?.metadata().partition_columns().to_vec(),
            None => Vec::new(),
        })
    }

    /// The store every table of the lake is read and written through.
    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// A DataFusion session in which unqualified names resolve in `default_schema`.
    /// Its planner is delta-rs's (its operations plan custom nodes); unlike delta-rs's
    /// own session, identifiers are normalized to lower case, as Spark SQL treats them.
    pub(crate) fn session(&self, default_schema: Option<&str>) -> SessionContext {
        let config = SessionConfig::new()
            .with_default_catalog_and_schema("datafusion", default_schema.unwrap_or("public"))
            .with_information_schema(false)
            .set_bool("datafusion.execution.parquet.schema_force_view_types", true)
            // delta-rs's workaround for dictionary join keys in dynamic filters.
            .set_usize("datafusion.optimizer.hash_join_inlist_pushdown_max_size", 0)
            .set_usize("datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values", 0);
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(config)
            .with_query_planner(deltalake_core::delta_datafusion::planner::DeltaPlanner::new())
            .build();
        SessionContext::new_with_state(state)
    }

    /// Registers `table` in `ctx` under its `schema.table` name.
    pub(crate) async fn register(&self, ctx: &SessionContext, name: &str, table: &DeltaTable) -> Result<(), DeltaTableError> {
        let (schema, bare) = name.split_once('.').unwrap_or(("public", name));
        if let Some(catalog) = ctx.catalog("datafusion") {
            if catalog.schema(schema).is_none() {
                catalog.register_schema(schema, Arc::new(MemorySchemaProvider::new())).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
            }
        }
        table.update_datafusion_session(&ctx.state())?;
        let provider = table.table_provider().await.map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        ctx.register_table(deltalake_core::datafusion::common::TableReference::partial(schema, bare), provider)
            .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        Ok(())
    }
}
