//! A naive MVCC reference model: every version with its create and delete ts in a
//! list. Model-based tests replay the same transactions into it and into the engine,
//! and compare what each shows at a snapshot.

use std::collections::HashMap;

use retina_core::RowChange;
use retina_core::TableSchema;
use retina_core::{TableId, Ts};
use retina_core::value::{encode_key, Row, Value};

struct ModelVersion {
    key: Vec<u8>,
    row: Row,
    created: Ts,
    deleted: Option<Ts>,
}

/// The reference model. Obviously correct, slow on purpose.
#[derive(Default)]
pub struct ReferenceModel {
    schemas: HashMap<TableId, TableSchema>,
    versions: HashMap<TableId, Vec<ModelVersion>>,
}

impl ReferenceModel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_table(&mut self, id: TableId, schema: TableSchema) {
        self.schemas.insert(id, schema);
        self.versions.insert(id, Vec::new());
    }

    fn row_key(&self, table: TableId, row: &[Value]) -> Vec<u8> {
        let schema = &self.schemas[&table];
        encode_key(schema.primary_key().iter().map(|&i| &row[i]))
    }

    /// Whether `key` has a live version now.
    pub fn is_live(&self, table: TableId, key: &[Value]) -> bool {
        let key = encode_key(key);
        self.versions[&table].iter().any(|v| v.key == key && v.deleted.is_none())
    }

    /// Live rows now, in insertion order.
    pub fn live_rows(&self, table: TableId) -> Vec<Row> {
        self.versions[&table].iter().filter(|v| v.deleted.is_none()).map(|v| v.row.clone()).collect()
    }

    /// Applies a transaction at `ts`. Panics on a change the engine would reject:
    /// tests generate valid streams.
    pub fn apply(&mut self, ts: Ts, changes: &[RowChange]) {
        for change in changes {
            match change {
                RowChange::Insert { table, row } => self.insert(*table, row.clone(), ts),
                RowChange::Delete { table, key } => self.delete(*table, &encode_key(key), ts),
                RowChange::Update { table, key, row } => {
                    self.delete(*table, &encode_key(key), ts);
                    self.insert(*table, row.clone(), ts);
                }
                RowChange::Upsert { table, row } => {
                    let key = self.row_key(*table, row);
                    if self.live(*table, &key).is_some() {
                        self.delete(*table, &key, ts);
                    }
                    self.insert(*table, row.clone(), ts);
                }
                RowChange::UpdateOrInsert { table, key, row } => {
                    let key = encode_key(key);
                    if self.live(*table, &key).is_some() {
                        self.delete(*table, &key, ts);
                    }
                    self.insert(*table, row.clone(), ts);
                }
                RowChange::DeleteIfPresent { table, key } => {
                    let key = encode_key(key);
                    if self.live(*table, &key).is_some() {
                        self.delete(*table, &key, ts);
                    }
                }
                RowChange::UpdateKeeping { table, key, row, keep } => {
                    let key = encode_key(key);
                    let previous = self.live(*table, &key).expect("model: update of a live key").clone();
                    let mut row = row.clone();
                    for &column in keep {
                        row[column] = previous[column].clone();
                    }
                    self.delete(*table, &key, ts);
                    self.insert(*table, row, ts);
                }
            }
        }
    }

    fn live(&self, table: TableId, key: &[u8]) -> Option<&Row> {
        self.versions[&table].iter().find(|v| v.key == key && v.deleted.is_none()).map(|v| &v.row)
    }

    fn insert(&mut self, table: TableId, row: Row, ts: Ts) {
        let key = self.row_key(table, &row);
        let versions = self.versions.get_mut(&table).expect("table added");
        assert!(!versions.iter().any(|v| v.key == key && v.deleted.is_none()), "model: duplicate insert");
        versions.push(ModelVersion { key, row, created: ts, deleted: None });
    }

    fn delete(&mut self, table: TableId, key: &[u8], ts: Ts) {
        let versions = self.versions.get_mut(&table).expect("table added");
        let live = versions.iter_mut().find(|v| v.key == key && v.deleted.is_none()).expect("model: delete of a live key");
        live.deleted = Some(ts);
    }

    /// Rows visible at `qts`, sorted by primary key.
    pub fn visible_at(&self, table: TableId, qts: Ts) -> Vec<Row> {
        let mut visible: Vec<(&Vec<u8>, &Row)> = self.versions[&table]
            .iter()
            .filter(|v| v.created <= qts && v.deleted.is_none_or(|d| d > qts))
            .map(|v| (&v.key, &v.row))
            .collect();
        visible.sort_by(|a, b| a.0.cmp(b.0));
        visible.into_iter().map(|(_, row)| row.clone()).collect()
    }

    /// Sorts engine output the same way as [`Self::visible_at`].
    pub fn sorted_by_key(&self, table: TableId, mut rows: Vec<Row>) -> Vec<Row> {
        rows.sort_by_cached_key(|row| self.row_key(table, row));
        rows
    }
}
