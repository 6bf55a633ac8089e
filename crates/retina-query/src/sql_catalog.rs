//! The `retina` catalog: SQL schemas and tables resolved from the engine whenever a
//! query is planned, so tables created while a server runs are visible at once.
//!
//! An engine table `a.b` is SQL table `b` in schema `a`; a name without a dot is in
//! schema `public` (the default). Schema `retina` is the system schema
//! ([`crate::system`]); it shadows user tables whose names start with `retina.`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider};
use datafusion::datasource::TableProvider;
use datafusion::error::{DataFusionError, Result};
use retina_core::{Engine, TableId};

use crate::figures::FiguresCollector;
use crate::provider::RetinaTable;
use crate::scan_context::ScanContext;
use crate::system::{split_table_name, SystemView, SystemViewKind, SYSTEM_SCHEMA};

/// Name of the catalog (the first part of a three-part name).
pub const CATALOG: &str = "retina";
/// The default schema.
pub const DEFAULT_SCHEMA: &str = "public";

pub struct RetinaCatalog {
    engine: Arc<Engine>,
    figures: Arc<FiguresCollector>,
    scans: Arc<ScanContext>,
    /// Schemas registered by the session (`pg_catalog`); they shadow engine tables of
    /// the same schema name.
    registered: RwLock<BTreeMap<String, Arc<dyn SchemaProvider>>>,
}

impl RetinaCatalog {
    pub fn new(engine: Arc<Engine>, figures: Arc<FiguresCollector>, scans: Arc<ScanContext>) -> Self {
        Self { engine, figures, scans, registered: RwLock::new(BTreeMap::new()) }
    }
}

impl fmt::Debug for RetinaCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetinaCatalog")
    }
}

impl CatalogProvider for RetinaCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names: BTreeSet<String> =
            self.engine.tables().iter().map(|t| split_table_name(t.name()).0.to_string()).collect();
        names.insert(DEFAULT_SCHEMA.to_string());
        names.insert(SYSTEM_SCHEMA.to_string());
        names.extend(self.registered.read().keys().cloned());
        names.into_iter().collect()
    }

    fn register_schema(&self, name: &str, schema: Arc<dyn SchemaProvider>) -> Result<Option<Arc<dyn SchemaProvider>>> {
        Ok(self.registered.write().insert(name.to_string(), schema))
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if let Some(schema) = self.registered.read().get(name) {
            return Some(Arc::clone(schema));
        }
        if name == SYSTEM_SCHEMA {
            return Some(Arc::new(SystemSchema { engine: Arc::clone(&self.engine), figures: Arc::clone(&self.figures) }));
        }
        let exists = name == DEFAULT_SCHEMA || self.engine.tables().iter().any(|t| split_table_name(t.name()).0 == name);
        exists.then(|| {
            Arc::new(UserSchema { engine: Arc::clone(&self.engine), name: name.to_string(), scans: Arc::clone(&self.scans) })
                as Arc<dyn SchemaProvider>
        })
    }
}

/// The tables of one SQL schema.
struct UserSchema {
    engine: Arc<Engine>,
    name: String,
    scans: Arc<ScanContext>,
}

impl fmt::Debug for UserSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UserSchema({})", self.name)
    }
}

impl UserSchema {
    fn table_id(&self, table: &str) -> Option<TableId> {
        engine_table_id(&self.engine, &self.name, table)
    }
}

/// The engine table that is SQL table `table` in schema `schema`.
pub fn engine_table_id(engine: &Engine, schema: &str, table: &str) -> Option<TableId> {
    engine.table_id(&format!("{schema}.{table}")).or_else(|| {
        // Dot-less engine names live in `public`.
        (schema == DEFAULT_SCHEMA && !table.contains('.')).then(|| engine.table_id(table)).flatten()
    })
}

#[async_trait]
impl SchemaProvider for UserSchema {
    fn table_names(&self) -> Vec<String> {
        self.engine
            .tables()
            .iter()
            .map(|t| split_table_name(t.name()))
            .filter(|(schema, _)| *schema == self.name)
            .map(|(_, table)| table.to_string())
            .collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        match self.table_id(name) {
            Some(id) => {
                let table = RetinaTable::new(Arc::clone(&self.engine), id, Arc::clone(&self.scans)).map_err(|e| DataFusionError::External(Box::new(e)))?;
                Ok(Some(Arc::new(table)))
            }
            None => Ok(None),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.table_id(name).is_some()
    }
}

/// The system views.
struct SystemSchema {
    engine: Arc<Engine>,
    figures: Arc<FiguresCollector>,
}

impl fmt::Debug for SystemSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SystemSchema")
    }
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        SystemViewKind::ALL.iter().map(|kind| kind.name().to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(SystemViewKind::from_name(name).map(|kind| {
            Arc::new(SystemView::new(kind, Arc::clone(&self.engine), Arc::clone(&self.figures))) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        SystemViewKind::from_name(name).is_some()
    }
}
