//! What one attempt of a task wrote, and how an attempt that does not finish
//! takes it back.
//!
//! Each statement of a task is its own Delta commit (Delta has no transaction
//! across statements or tables), so when statement 3 loses its commit,
//! statements 1 and 2 have already committed. Left alone, they would stay
//! visible, and a retry would apply them twice. An attempt therefore records
//! every commit it made, and an attempt that ends in an error *undoes* them,
//! newest first: one commit per undone version that removes the files that
//! version added and re-adds the files it removed (with their statistics and
//! the older metadata, if it changed). A table the attempt created is deleted.
//!
//! The undo is refused, with an error naming the table and version, when a
//! later commit of someone else already removed a file the attempt added (that
//! writer built on the attempt's rows; taking them back would resurrect rows it
//! deleted). What an undo cannot see is a writer that only *read* the attempt's
//! rows before they were taken back: only a schedule that keeps conflicting
//! tasks apart (`admission`, `batches`) rules that out, as it rules out the
//! conflict itself.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake_core::kernel::transaction::CommitBuilder;
use deltalake_core::kernel::{Action, LogicalFileView};
use deltalake_core::protocol::DeltaOperation;
use deltalake_core::{DeltaTable, DeltaTableError};
use futures::TryStreamExt as _;
use object_store::path::Path;
use object_store::ObjectStoreExt as _;

pub use crate::error::UndoError;
use crate::lake::Lake;
use crate::recording_store::RecordingStore;

/// A version an attempt committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub table: String,
    pub version: u64,
    pub statement: usize,
}

/// How often an undo is re-checked and re-committed when other writers commit
/// between its snapshot and its commit.
const UNDO_ATTEMPTS: usize = 10;

/// One attempt's writes: every object put through its tables' store, and the
/// versions its statements committed.
#[derive(Debug)]
pub struct AttemptWrites {
    recorder: Arc<RecordingStore>,
    commits: Vec<Commit>,
}

impl AttemptWrites {
    pub fn new(lake: &Lake) -> Self {
        Self { recorder: Arc::new(RecordingStore::new(Arc::clone(lake.store()))), commits: Vec::new() }
    }

    /// The store an attempt's targets are opened through.
    pub(crate) fn recorder(&self) -> &Arc<RecordingStore> {
        &self.recorder
    }

    /// Where the record stands before a statement (see [`Self::statement_ended`]).
    pub(crate) fn mark(&self) -> usize {
        self.recorder.len()
    }

    /// Notes the versions of `table` that the statement begun at `mark` committed,
    /// and, when its commit was lost to a concurrent one, deletes the data files it
    /// wrote (they are in no version; only then: after other errors a commit may have
    /// happened, and its files are the table's).
    pub(crate) async fn statement_ended(&mut self, lake: &Lake, mark: usize, statement: usize, table: Option<&str>, lost_commit: bool) {
        let written = self.recorder.written_since(mark);
        for path in &written {
            match (commit_version(path), table) {
                (Some(version), Some(table)) => self.commits.push(Commit { table: table.to_string(), version, statement }),
                (None, _) if lost_commit && !path.as_ref().contains("/_delta_log/") => {
                    // Best effort: what cannot be deleted is an orphan file no version lists.
                    let _ = lake.store().delete(path).await;
                }
                _ => {}
            }
        }
    }

    /// The versions committed so far, oldest first.
    pub fn commits(&self) -> &[Commit] {
        &self.commits
    }

    /// Takes every commit of the attempt back, newest first; returns how many.
    pub async fn undo(&self, lake: &Lake) -> Result<usize, UndoError> {
        for commit in self.commits.iter().rev() {
            undo_commit(lake, commit).await?;
        }
        Ok(self.commits.len())
    }
}

/// The version of a Delta commit file (`…/_delta_log/00000000000000000007.json`).
fn commit_version(path: &Path) -> Option<u64> {
    let name = path.filename()?;
    let digits = name.strip_suffix(".json")?;
    let in_log = path.parts().collect::<Vec<_>>().iter().rev().nth(1).is_some_and(|p| p.as_ref() == "_delta_log");
    (in_log && digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

async fn undo_commit(lake: &Lake, commit: &Commit) -> Result<(), UndoError> {
    let delta = |source| UndoError::Delta { table: commit.table.clone(), version: commit.version, source };
    if commit.version == 0 {
        return undo_create(lake, commit).await;
    }
    let before = lake.load_at(&commit.table, commit.version - 1).await.map_err(delta)?;
    let after = lake.load_at(&commit.table, commit.version).await.map_err(delta)?;
    let before_files = files_of(&before).await.map_err(delta)?;
    let after_files = files_of(&after).await.map_err(delta)?;
    let added: Vec<&FileKey> = after_files.keys().filter(|k| !before_files.contains_key(*k)).collect();
    let removed: Vec<&LogicalFileView> = before_files.iter().filter(|(k, _)| !after_files.contains_key(*k)).map(|(_, f)| f).collect();
    let before_metadata = before.snapshot().map_err(delta)?.metadata().clone();
    let after_metadata = after.snapshot().map_err(delta)?.metadata().clone();
    let metadata_changed = as_json(&before_metadata) != as_json(&after_metadata);
    if added.is_empty() && removed.is_empty() && !metadata_changed {
        return Ok(());
    }
    for _ in 0..UNDO_ATTEMPTS {
        let latest = lake.load_through(&commit.table, None).await.map_err(delta)?.ok_or_else(|| UndoError::BuiltUpon {
            table: commit.table.clone(),
            version: commit.version,
            detail: "the table is gone".to_string(),
        })?;
        let latest_files = files_of(&latest).await.map_err(delta)?;
        let mut actions = Vec::with_capacity(added.len() + removed.len() + 1);
        for key in &added {
            let file = latest_files.get(*key).ok_or_else(|| UndoError::BuiltUpon {
                table: commit.table.clone(),
                version: commit.version,
                detail: format!("a later commit removed {}, which it added", key.0),
            })?;
            actions.push(Action::Remove(file.remove_action(true)));
        }
        for file in &removed {
            #[allow(deprecated)] // The Add with its statistics is what a re-add needs.
            let mut add = file.add_action();
            add.data_change = true;
            actions.push(Action::Add(add));
        }
        if metadata_changed {
            let latest_metadata = latest.snapshot().map_err(delta)?.metadata().clone();
            if as_json(&latest_metadata) != as_json(&after_metadata) {
                return Err(UndoError::BuiltUpon {
                    table: commit.table.clone(),
                    version: commit.version,
                    detail: "a later commit changed the metadata again".to_string(),
                });
            }
            actions.push(Action::Metadata(before_metadata.clone()));
        }
        let snapshot = latest.snapshot().map_err(delta)?;
        let app_metadata = HashMap::from([("retina.undoes".to_string(), serde_json::json!({ "version": commit.version, "statement": commit.statement }))]);
        let committed = CommitBuilder::default()
            .with_actions(actions)
            .with_app_metadata(app_metadata)
            .with_max_retries(0)
            .build(Some(snapshot), latest.log_store(), DeltaOperation::Restore { version: Some(commit.version - 1), datetime: None })
            .await;
        match committed {
            Ok(_) => return Ok(()),
            // Someone committed in between: check again against what they did.
            Err(error) if crate::conflict::ConflictKind::of(&error).is_some() => continue,
            Err(error) => return Err(delta(error)),
        }
    }
    Err(UndoError::BuiltUpon {
        table: commit.table.clone(),
        version: commit.version,
        detail: format!("other writers kept committing ({UNDO_ATTEMPTS} tries)"),
    })
}

/// A table the attempt created: deleted with everything in it, unless someone
/// else committed to it since.
async fn undo_create(lake: &Lake, commit: &Commit) -> Result<(), UndoError> {
    let delta = |source| UndoError::Delta { table: commit.table.clone(), version: commit.version, source };
    if let Some(latest) = lake.load_through(&commit.table, None).await.map_err(delta)? {
        if latest.version() != Some(0) {
            return Err(UndoError::BuiltUpon {
                table: commit.table.clone(),
                version: 0,
                detail: format!("the attempt created the table, and others committed to it since (up to version {})", latest.version().unwrap_or_default()),
            });
        }
    }
    lake.drop_table(&commit.table).await.map_err(delta)
}

/// A file as the log knows it: its path and its deletion vector.
type FileKey = (String, Option<String>);

async fn files_of(table: &DeltaTable) -> Result<HashMap<FileKey, LogicalFileView>, DeltaTableError> {
    let log_store = table.log_store();
    let views: Vec<LogicalFileView> = table.snapshot()?.snapshot().file_views(log_store.as_ref(), None).try_collect().await?;
    let mut out = HashMap::with_capacity(views.len());
    for view in views {
        let key = (view.path().to_string(), view.deletion_vector_descriptor().map(|dv| as_json(&dv).to_string()));
        out.entry(key).or_insert(view);
    }
    Ok(out)
}

fn as_json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_commit_files_of_a_delta_log_are_versions() {
        assert_eq!(commit_version(&Path::from("lake/t/e/_delta_log/00000000000000000007.json")), Some(7));
        assert_eq!(commit_version(&Path::from("lake/t/e/_delta_log/00000000000000000010.checkpoint.parquet")), None);
        assert_eq!(commit_version(&Path::from("lake/t/e/_delta_log/_last_checkpoint")), None);
        assert_eq!(commit_version(&Path::from("lake/t/e/p=a/00000000000000000007.json")), None, "not in a log");
        assert_eq!(commit_version(&Path::from("lake/t/e/_delta_log/7.json")), None);
    }
}
