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
    /// A local directory (created if missing), a `file://` URL, or an object store
    /// (`s3://BUCKET/PREFIX?endpoint=…`, `gs://`, `az://`, configured as Retina's
    /// data dirs are: from the environment and the URL's options).
    pub fn open(location: &str) -> Result<Self> {
        let shown = retina_storage::redacted(location);
        let lake_error = |detail: String| JobsError::Lake { lake: shown.clone(), detail };
        let local = match Url::parse(location) {
            Ok(url) if url.scheme() == "file" => Some(url.to_file_path().map_err(|()| lake_error("not a local path".to_string()))?),
            Ok(url) if url.scheme().len() > 1 => None,
            _ => Some(std::path::PathBuf::from(location)),
        };
        if let Some(path) = local {
            std::fs::create_dir_all(&path).map_err(|e| lake_error(format!("cannot create it: {e}")))?;
            let path = path.canonicalize().map_err(|e| lake_error(e.to_string()))?;
            let root = Url::from_directory_path(&path).map_err(|()| lake_error("not an absolute path".to_string()))?;
            return Ok(Self { root, store: Arc::new(object_store::local::LocalFileSystem::new()), mirror: None });
        }
        let (store, prefix) = retina_storage::open_object_store(location).map_err(|e| lake_error(e.to_string()))?;
        let url = Url::parse(location).map_err(|e| lake_error(e.to_string()))?;
        let folder = if prefix.as_ref().is_empty() { String::new() } else { format!("{}/", prefix.as_ref()) };
        let root = Url::parse(&format!("{}://{}/{folder}", url.scheme(), url.host_str().unwrap_or_default())).map_err(|e| lake_error(e.to_string()))?;
        register_log_store(&root);
        Ok(Self { root, store, mirror: None })
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
        if !self.has_log(&url).await? {
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

    /// Whether the folder at `url` holds a Delta log.
    async fn has_log(&self, url: &Url) -> Result<bool, DeltaTableError> {
        use futures::StreamExt as _;
        let log = object_store::path::Path::from_url_path(format!("{}_delta_log/", url.path()))?;
        Ok(self.store.list(Some(&log)).next().await.transpose()?.is_some())
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

    /// Table `name` of the lake (never the mirror) at `version`.
    pub(crate) async fn load_at(&self, name: &str, version: u64) -> Result<DeltaTable, DeltaTableError> {
        let url = self.table_url(name).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        let mut table = DeltaTableBuilder::from_url(url.clone())?.with_storage_backend(Arc::clone(&self.store), url).build()?;
        table.load_version(version).await?;
        Ok(table)
    }

    /// Deletes table `name`: every object under its folder, then the folders.
    pub(crate) async fn drop_table(&self, name: &str) -> Result<(), DeltaTableError> {
        use futures::TryStreamExt as _;
        let url = self.table_url(name).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        let prefix = object_store::path::Path::from_url_path(url.path())?;
        let objects: Vec<object_store::ObjectMeta> = self.store.list(Some(&prefix)).try_collect().await?;
        for object in objects {
            object_store::ObjectStoreExt::delete(self.store.as_ref(), &object.location).await?;
        }
        if let Ok(folder) = url.to_file_path() {
            remove_empty_dirs(&folder);
        }
        Ok(())
    }

    /// Every row of table `name` (the lake's, or the mirror's at its cut), each
    /// rendered as its cells joined by `|`, sorted: what checks and comparisons of
    /// two lakes read (None: no such table).
    pub async fn sorted_rows(&self, name: &str) -> Result<Option<Vec<String>>, DeltaTableError> {
        let Some(table) = self.load(name).await? else { return Ok(None) };
        let generic = |e: deltalake_core::datafusion::error::DataFusionError| DeltaTableError::Generic(e.to_string());
        let ctx = SessionContext::new();
        table.update_datafusion_session(&ctx.state())?;
        ctx.register_table("t", table.table_provider().await.map_err(generic)?).map_err(generic)?;
        let batches = ctx.sql("SELECT * FROM t").await.map_err(generic)?.collect().await.map_err(generic)?;
        let mut rows = Vec::new();
        for batch in &batches {
            for row in 0..batch.num_rows() {
                let mut cells = Vec::with_capacity(batch.num_columns());
                for column in batch.columns() {
                    cells.push(deltalake_core::arrow::util::display::array_value_to_string(column, row)?);
                }
                rows.push(cells.join("|"));
            }
        }
        rows.sort();
        Ok(Some(rows))
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

/// Removes `dir` and the folders under it that hold no file.
fn remove_empty_dirs(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.path().is_dir() {
                remove_empty_dirs(&entry.path());
            }
        }
    }
    // Fails (and keeps it) when something is left inside.
    let _ = std::fs::remove_dir(dir);
}

/// delta-rs finds a table's log store by URL scheme, and registers only `file://`
/// and `memory://` itself (the per-cloud crates register theirs). Retina's object
/// stores come configured, and commit with a create-once put (S3's `If-None-Match`,
/// GCS's and Azure's preconditions), which is what delta-rs's default log store
/// needs, so that one serves every scheme a lake is opened on.
fn register_log_store(root: &Url) {
    use deltalake_core::logstore::{default_logstore, logstore_factories, LogStore, LogStoreFactory, StorageConfig};

    struct CreateOncePutLogStore;
    impl LogStoreFactory for CreateOncePutLogStore {
        fn with_options(&self, prefixed: Arc<dyn ObjectStore>, root: Arc<dyn ObjectStore>, location: &Url, options: &StorageConfig) -> deltalake_core::DeltaResult<Arc<dyn LogStore>> {
            Ok(default_logstore(prefixed, root, location, options))
        }
    }
    if let Ok(scheme) = Url::parse(&format!("{}://", root.scheme())) {
        logstore_factories().entry(scheme).or_insert_with(|| Arc::new(CreateOncePutLogStore));
    }
}
