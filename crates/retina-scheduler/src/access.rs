//! Resource accesses: what a task does to which table and which partitions.
//!
//! Names and partition values are interned into [`Sym`]s so that conflict
//! discovery compares integers, not strings: the index in `index.rs` touches every
//! access once and every candidate pair once, and string hashing would dominate.

use std::collections::HashMap;

/// An interned string (table name, column name or partition value).
pub type Sym = u32;

/// Interns strings to dense ids. Invariant: `names[id]` is the string of `id`, and
/// `ids[names[id]] == id`.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    ids: HashMap<String, Sym>,
    names: Vec<String>,
}

impl Interner {
    /// The id of `s`, allocating one if `s` is new.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as Sym;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// The id of `s` if it was interned.
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.ids.get(s).copied()
    }

    /// The string of `id` (`"?"` for an id from another interner, never a panic).
    pub fn name(&self, id: Sym) -> &str {
        self.names.get(id as usize).map(String::as_str).unwrap_or("?")
    }
}

/// How a task touches a table. The order is the row/column order of the conflict
/// matrices in `rules.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mode {
    /// Reads rows (SELECT, subqueries, MERGE source, ...).
    Read,
    /// Blind append: INSERT INTO whose query does not read its own target.
    Insert,
    /// UPDATE: reads and rewrites files of the target.
    Update,
    /// DELETE (and TRUNCATE): reads and removes files of the target.
    Delete,
    /// MERGE INTO, and an INSERT that reads its own target.
    Merge,
    /// INSERT OVERWRITE: removes the files of its partitions and adds new ones.
    Overwrite,
    /// OPTIMIZE / compaction: rewrites files without changing data.
    Optimize,
    /// Schema or metadata change (CREATE/ALTER/DROP ...): conflicts with everything.
    Ddl,
}

/// Number of [`Mode`] values; sizes the per-mode lists of the index.
pub const MODE_COUNT: usize = 8;

impl Mode {
    /// All modes in matrix order.
    pub const ALL: [Mode; MODE_COUNT] = [
        Mode::Read,
        Mode::Insert,
        Mode::Update,
        Mode::Delete,
        Mode::Merge,
        Mode::Overwrite,
        Mode::Optimize,
        Mode::Ddl,
    ];

    /// Position in [`Mode::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Anything but a read changes the table (the paper's "write-like").
    pub fn is_write(self) -> bool {
        self != Mode::Read
    }

    /// The modes the paper treats as exclusive: completing a task that held one of
    /// these is a material change that triggers re-planning.
    pub fn is_exclusive(self) -> bool {
        matches!(self, Mode::Update | Mode::Delete | Mode::Merge | Mode::Overwrite | Mode::Ddl)
    }

    /// Upper-case name as written in SQL.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "READ",
            Mode::Insert => "INSERT",
            Mode::Update => "UPDATE",
            Mode::Delete => "DELETE",
            Mode::Merge => "MERGE",
            Mode::Overwrite => "OVERWRITE",
            Mode::Optimize => "OPTIMIZE",
            Mode::Ddl => "DDL",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The partitions an access may touch, as a conjunction of per-column value sets:
/// `{date: {d1, d2}, region: {eu}}` means "date in (d1, d2) and region = eu".
///
/// Invariants: columns are sorted and unique; every value list is sorted, unique
/// and non-empty. No columns at all means the whole table — the safe default
/// whenever a predicate cannot be proven to restrict partitions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PartitionSpec {
    cols: Vec<(Sym, Vec<Sym>)>,
}

impl PartitionSpec {
    /// The whole table.
    pub fn whole() -> Self {
        Self::default()
    }

    /// Builds a spec from (column, values) pairs, normalising order and duplicates.
    /// A column listed twice keeps the intersection of its value sets; if that is
    /// empty the predicate is contradictory and we fall back to the whole table
    /// (safe, and contradictions are rare enough not to matter).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Sym, Vec<Sym>)>) -> Self {
        let mut cols: Vec<(Sym, Vec<Sym>)> = Vec::new();
        for (col, mut vals) in pairs {
            vals.sort_unstable();
            vals.dedup();
            if vals.is_empty() {
                return Self::whole();
            }
            match cols.iter_mut().find(|(c, _)| *c == col) {
                Some((_, existing)) => {
                    existing.retain(|v| vals.binary_search(v).is_ok());
                    if existing.is_empty() {
                        return Self::whole();
                    }
                }
                None => cols.push((col, vals)),
            }
        }
        cols.sort_unstable_by_key(|(c, _)| *c);
        Self { cols }
    }

    /// True when the spec does not restrict partitions.
    pub fn is_whole(&self) -> bool {
        self.cols.is_empty()
    }

    /// The (column, sorted values) constraints.
    pub fn columns(&self) -> &[(Sym, Vec<Sym>)] {
        &self.cols
    }

    /// The values constrained for `col`, if any.
    pub fn values_of(&self, col: Sym) -> Option<&[Sym]> {
        self.cols.iter().find(|(c, _)| *c == col).map(|(_, v)| v.as_slice())
    }

    /// Whether some partition satisfies both specs: every column constrained by
    /// both must share a value; columns constrained by one side only do not
    /// separate anything.
    pub fn overlaps(&self, other: &PartitionSpec) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.cols.len() && j < other.cols.len() {
            let (ca, va) = &self.cols[i];
            let (cb, vb) = &other.cols[j];
            match ca.cmp(cb) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if !sorted_intersect(va, vb) {
                        return false;
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        true
    }

    /// A spec covering both: exact when the two constrain the same single column
    /// or are equal, otherwise the whole table (safe over-approximation).
    pub fn union(&self, other: &PartitionSpec) -> PartitionSpec {
        if self == other {
            return self.clone();
        }
        match (self.cols.as_slice(), other.cols.as_slice()) {
            ([(ca, va)], [(cb, vb)]) if ca == cb => {
                let mut vals: Vec<Sym> = va.iter().chain(vb.iter()).copied().collect();
                vals.sort_unstable();
                vals.dedup();
                PartitionSpec { cols: vec![(*ca, vals)] }
            }
            _ => PartitionSpec::whole(),
        }
    }

    /// Human-readable form, e.g. `event_date='2025-01-15'` or `*` for the whole table.
    pub fn display(&self, names: &Interner) -> String {
        if self.cols.is_empty() {
            return "*".to_string();
        }
        let parts: Vec<String> = self
            .cols
            .iter()
            .map(|(c, vals)| {
                let vs: Vec<String> = vals.iter().map(|v| format!("'{}'", names.name(*v))).collect();
                if vs.len() == 1 {
                    format!("{}={}", names.name(*c), vs.join(""))
                } else {
                    format!("{} IN ({})", names.name(*c), vs.join(", "))
                }
            })
            .collect();
        parts.join(" AND ")
    }
}

fn sorted_intersect(a: &[Sym], b: &[Sym]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// One access of one task: `(table, mode, partitions)` as in the paper's model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    /// Interned, normalised (lower-case, dot-joined) table name.
    pub table: Sym,
    /// What the task does to the table.
    pub mode: Mode,
    /// Which partitions; whole table when unconstrained.
    pub partitions: PartitionSpec,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_and_union() {
        let a = PartitionSpec::from_pairs([(1, vec![10, 11]), (2, vec![20])]);
        let b = PartitionSpec::from_pairs([(1, vec![11])]);
        let c = PartitionSpec::from_pairs([(1, vec![12]), (2, vec![20])]);
        let d = PartitionSpec::from_pairs([(3, vec![30])]);
        assert!(a.overlaps(&b));
        assert!(!a.overlaps(&c));
        assert!(a.overlaps(&d), "different columns do not separate");
        assert!(a.overlaps(&PartitionSpec::whole()));
        assert_eq!(b.union(&PartitionSpec::from_pairs([(1, vec![12])])).values_of(1), Some(&[11, 12][..]));
        assert!(a.union(&c).is_whole());
    }

    #[test]
    fn contradiction_falls_back_to_whole_table() {
        let s = PartitionSpec::from_pairs([(1, vec![10]), (1, vec![11])]);
        assert!(s.is_whole());
        let s = PartitionSpec::from_pairs([(1, vec![10, 11]), (1, vec![11])]);
        assert_eq!(s.values_of(1), Some(&[11][..]));
    }
}
