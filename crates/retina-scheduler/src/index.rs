//! The conflict index: accesses bucketed by table → partition value → mode, so
//! that inserting an access enumerates only the accesses it can conflict with.
//!
//! This replaces the paper's all-pairs discovery (O(n²)). Inserting access `a`
//! on table `T` visits:
//! - if `a` constrains `T`'s primary partition column to values `V`: the accesses
//!   of `T` that do not constrain it ("wide"), and for each `v ∈ V` the accesses
//!   in bucket `(T, v)`;
//! - otherwise (whole table, or only secondary columns): every access of `T`;
//!
//! and in both cases only the per-mode lists whose mode conflicts with `a`'s under
//! the rule set. Every visited candidate shares the table and a primary value with
//! `a` and has a conflicting mode, so the work is O(accesses + conflicting pairs +
//! pairs rejected only by a secondary column). Each unordered pair is reported
//! once: by whichever of the two is inserted second.

use std::collections::HashMap;

use crate::access::{Access, Mode, PartitionSpec, Sym, MODE_COUNT};
use crate::rules::Rules;

/// Per-mode lists of access ids.
type ModeLists = [Vec<u32>; MODE_COUNT];

#[derive(Debug, Default)]
struct TableLists {
    /// Every live access of the table.
    all: ModeLists,
    /// Live accesses that do not constrain the primary partition column.
    wide: ModeLists,
}

/// A stored access. Invariant: `live` entries are in exactly the lists their
/// table/spec/mode select; dead ones in none.
#[derive(Debug, Clone)]
struct Entry {
    owner: u32,
    table: Sym,
    mode: Mode,
    spec: PartitionSpec,
    /// Values of the primary column, empty when wide.
    keys: Vec<Sym>,
    live: bool,
}

/// Incremental conflict index over accesses identified by dense `u32` ids.
#[derive(Debug, Default)]
pub struct ConflictIndex {
    rules: Rules,
    primary: HashMap<Sym, Sym>,
    tables: HashMap<Sym, TableLists>,
    buckets: HashMap<(Sym, Sym), ModeLists>,
    entries: Vec<Entry>,
    stamp: Vec<u32>,
    generation: u32,
}

impl ConflictIndex {
    /// An empty index under `rules`, bucketing each table by `primary[table]`.
    pub fn new(rules: Rules, primary: HashMap<Sym, Sym>) -> Self {
        Self { rules, primary, ..Default::default() }
    }

    /// Sets the bucketing column of `table` unless it already has one. Changing
    /// it later would strand accesses bucketed by the old column, so the first
    /// declaration wins; accesses inserted before it are simply wide, which is
    /// correct (wide accesses are compared with everything on their table).
    pub fn declare_primary(&mut self, table: Sym, column: Sym) {
        self.primary.entry(table).or_insert(column);
    }

    /// Number of access ids ever inserted (live or removed).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was ever inserted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The task that owns access `id`.
    pub fn owner(&self, id: u32) -> u32 {
        self.entries[id as usize].owner
    }

    /// Inserts `access` of task `owner`, appending to `out` the ids of live
    /// accesses of *other* tasks that conflict with it. Returns the new id.
    pub fn insert(&mut self, owner: u32, access: &Access, out: &mut Vec<u32>) -> u32 {
        let id = self.entries.len() as u32;
        let spec = self.rules.effective_spec(access.mode, &access.partitions);
        let keys: Vec<Sym> = match self.primary.get(&access.table) {
            Some(col) => spec.values_of(*col).map(<[Sym]>::to_vec).unwrap_or_default(),
            None => Vec::new(),
        };
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        let row = *self.rules.row(access.mode);
        let entry = Entry { owner, table: access.table, mode: access.mode, spec, keys, live: true };
        if let Some(t) = self.tables.get(&entry.table) {
            if entry.keys.is_empty() {
                for (m, list) in t.all.iter().enumerate() {
                    if row[m] {
                        check_list(&self.entries, &entry, list, out);
                    }
                }
            } else {
                for (m, list) in t.wide.iter().enumerate() {
                    if row[m] {
                        check_list(&self.entries, &entry, list, out);
                    }
                }
                for &v in &entry.keys {
                    let Some(b) = self.buckets.get(&(entry.table, v)) else { continue };
                    for (m, list) in b.iter().enumerate() {
                        if !row[m] {
                            continue;
                        }
                        for &other in list {
                            // An access in several shared buckets is checked once.
                            let s = &mut self.stamp[other as usize];
                            if *s == self.generation {
                                continue;
                            }
                            *s = self.generation;
                            check_one(&self.entries, &entry, other, out);
                        }
                    }
                }
            }
        }
        let m = entry.mode.index();
        let t = self.tables.entry(entry.table).or_default();
        t.all[m].push(id);
        if entry.keys.is_empty() {
            t.wide[m].push(id);
        }
        for &v in &entry.keys {
            self.buckets.entry((entry.table, v)).or_default()[m].push(id);
        }
        self.entries.push(entry);
        self.stamp.push(0);
        id
    }

    /// Removes access `id` (a completed task's access). Idempotent.
    pub fn remove(&mut self, id: u32) {
        let Some(e) = self.entries.get_mut(id as usize) else { return };
        if !e.live {
            return;
        }
        e.live = false;
        let (table, m, keys) = (e.table, e.mode.index(), std::mem::take(&mut e.keys));
        if let Some(t) = self.tables.get_mut(&table) {
            remove_from(&mut t.all[m], id);
            if keys.is_empty() {
                remove_from(&mut t.wide[m], id);
            }
        }
        for v in keys {
            if let Some(b) = self.buckets.get_mut(&(table, v)) {
                remove_from(&mut b[m], id);
                if b.iter().all(Vec::is_empty) {
                    self.buckets.remove(&(table, v));
                }
            }
        }
    }
}

fn check_list(entries: &[Entry], new: &Entry, list: &[u32], out: &mut Vec<u32>) {
    for &other in list {
        check_one(entries, new, other, out);
    }
}

#[inline]
fn check_one(entries: &[Entry], new: &Entry, other: u32, out: &mut Vec<u32>) {
    let o = &entries[other as usize];
    if o.owner != new.owner && o.spec.overlaps(&new.spec) {
        out.push(other);
    }
}

fn remove_from(list: &mut Vec<u32>, id: u32) {
    if let Some(pos) = list.iter().position(|&x| x == id) {
        list.swap_remove(pos);
    }
}
