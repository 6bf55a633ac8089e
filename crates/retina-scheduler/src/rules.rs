//! Which pairs of access modes conflict, per rule set.
//!
//! Two accesses conflict when they name the same table, their partitions overlap
//! (`PartitionSpec::overlaps`) and the rule set's matrix says their modes conflict.
//! The matrices, with `x` = conflict, `r` = conflict only when read/write conflicts
//! are enabled (the default; Delta itself never raises for a read in another task,
//! so `--ignore-read-write` turns these off), `.` = no conflict:
//!
//! **paper** (the paper's `C(tp, tq)`: at least one write-like side)
//!
//! ```text
//!            READ INS UPD DEL MRG OVW OPT DDL
//! READ        .    r   r   r   r   r   r   x
//! INSERT      r    x   x   x   x   x   x   x
//! UPDATE      r    x   x   x   x   x   x   x
//! DELETE      r    x   x   x   x   x   x   x
//! MERGE       r    x   x   x   x   x   x   x
//! OVERWRITE   r    x   x   x   x   x   x   x
//! OPTIMIZE    r    x   x   x   x   x   x   x
//! DDL         x    x   x   x   x   x   x   x
//! ```
//!
//! **delta-write-serializable** (Delta Lake's default isolation level): blind
//! appends never conflict with each other nor with UPDATE/DELETE/MERGE (the append
//! is serialised after them); UPDATE/DELETE/MERGE conflict with each other on the
//! same files; OVERWRITE is a DELETE of its partitions; OPTIMIZE conflicts with
//! everything that removes files but not with appends, and does not change what a
//! reader sees; a metadata change (DDL) fails every concurrent transaction.
//!
//! ```text
//!            READ INS UPD DEL MRG OVW OPT DDL
//! READ        .    r   r   r   r   r   .   x
//! INSERT      r    .   .   .   .   .   .   x
//! UPDATE      r    .   x   x   x   x   x   x
//! DELETE      r    .   x   x   x   x   x   x
//! MERGE       r    .   x   x   x   x   x   x
//! OVERWRITE   r    .   x   x   x   x   x   x
//! OPTIMIZE    .    .   x   x   x   x   x   x
//! DDL         x    x   x   x   x   x   x   x
//! ```
//!
//! **delta-serializable**: as above, but UPDATE/DELETE/MERGE/OVERWRITE also
//! conflict with a concurrent append (the append may add rows their predicate
//! should have seen). Appends still never conflict with each other.
//!
//! **delta-rs** (what delta-rs 1.x's conflict checker raises, under its default
//! WriteSerializable): the delta-serializable matrix, and a blind append conflicts
//! with a rewrite *anywhere in the table*: delta-rs records no read predicate for an
//! append, so it counts every file of its snapshot as read, and a concurrent
//! UPDATE/DELETE/MERGE/OVERWRITE that removes any file fails the append with
//! `ConcurrentDeleteRead`. So an INSERT is compared on the whole table
//! ([`Rules::effective_spec`], applied by the conflict index and the all-pairs check). `retina jobs run` uses these rules: they are
//! the ones its commits meet.
//!
//! An INSERT that reads its own target is analysed as MERGE (see `analysis`), which
//! is how Delta treats it.

use crate::access::{Mode, PartitionSpec, MODE_COUNT};

/// Which conflict matrix to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleKind {
    /// The paper's rule: same table, one write-like side, overlapping partitions.
    Paper,
    /// Delta Lake under WriteSerializable (the default).
    DeltaWriteSerializable,
    /// Delta Lake under Serializable.
    DeltaSerializable,
    /// delta-rs's conflict checker (appends read the whole table).
    DeltaRs,
}

impl RuleKind {
    /// Parses the CLI spelling (`paper`, `delta-write-serializable`, `delta-serializable`).
    pub fn parse(s: &str) -> Option<RuleKind> {
        match s.to_ascii_lowercase().as_str() {
            "paper" => Some(RuleKind::Paper),
            "delta-write-serializable" | "delta" | "write-serializable" => Some(RuleKind::DeltaWriteSerializable),
            "delta-serializable" | "serializable" => Some(RuleKind::DeltaSerializable),
            "delta-rs" | "deltars" => Some(RuleKind::DeltaRs),
            _ => None,
        }
    }

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Paper => "paper",
            RuleKind::DeltaWriteSerializable => "delta-write-serializable",
            RuleKind::DeltaSerializable => "delta-serializable",
            RuleKind::DeltaRs => "delta-rs",
        }
    }
}

/// A rule set: the matrix plus the read/write switch, precomputed as a symmetric
/// boolean table so the index can look a pair up in O(1).
///
/// Invariant: `matrix[a][b] == matrix[b][a]` for all modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    kind: RuleKind,
    read_write: bool,
    matrix: [[bool; MODE_COUNT]; MODE_COUNT],
}

impl Default for Rules {
    fn default() -> Self {
        Rules::new(RuleKind::DeltaWriteSerializable, true)
    }
}

impl Rules {
    /// Builds the rule set. `read_write` decides whether a READ conflicts with a
    /// data-changing write on overlapping partitions (DDL always conflicts).
    pub fn new(kind: RuleKind, read_write: bool) -> Rules {
        let mut matrix = [[false; MODE_COUNT]; MODE_COUNT];
        for a in Mode::ALL {
            for b in Mode::ALL {
                matrix[a.index()][b.index()] = cell(kind, read_write, a, b);
            }
        }
        Rules { kind, read_write, matrix }
    }

    /// The matrix in use.
    pub fn kind(&self) -> RuleKind {
        self.kind
    }

    /// Whether READ vs write conflicts are enabled.
    pub fn read_write(&self) -> bool {
        self.read_write
    }

    /// Whether two modes conflict (on overlapping partitions of the same table).
    pub fn modes_conflict(&self, a: Mode, b: Mode) -> bool {
        self.matrix[a.index()][b.index()]
    }

    /// Whether a blind append counts as reading every file of its table (delta-rs):
    /// its accesses are then whole-table, whatever partition it writes.
    pub fn appends_read_whole_table(&self) -> bool {
        self.kind == RuleKind::DeltaRs
    }

    /// The partitions an access of `mode` to `spec` is compared on under these
    /// rules: `spec`, or the whole table for an append that reads it all.
    pub fn effective_spec(&self, mode: Mode, spec: &PartitionSpec) -> PartitionSpec {
        if mode == Mode::Insert && self.appends_read_whole_table() {
            PartitionSpec::whole()
        } else {
            spec.clone()
        }
    }

    /// The row of `a`: which modes conflict with it.
    pub fn row(&self, a: Mode) -> &[bool; MODE_COUNT] {
        &self.matrix[a.index()]
    }
}

/// One cell of the matrix; symmetric by construction (each rule is stated on the
/// unordered pair).
fn cell(kind: RuleKind, read_write: bool, a: Mode, b: Mode) -> bool {
    use Mode::*;
    if a == Ddl || b == Ddl {
        return true;
    }
    if a == Read && b == Read {
        return false;
    }
    if a == Read || b == Read {
        let other = if a == Read { b } else { a };
        return read_write && (kind == RuleKind::Paper || other != Optimize);
    }
    if kind == RuleKind::Paper {
        return true;
    }
    // Delta: both sides are data writes.
    let rewrites = |m: Mode| matches!(m, Update | Delete | Merge | Overwrite);
    match (a, b) {
        (Insert, Insert) => false,
        (Insert, Optimize) | (Optimize, Insert) => false,
        (Insert, x) | (x, Insert) => matches!(kind, RuleKind::DeltaSerializable | RuleKind::DeltaRs) && rewrites(x),
        _ => true, // rewrites and OPTIMIZE among themselves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of every matrix, written out as in the module docs. `r` cells are
    /// checked in both read/write settings.
    #[test]
    fn conflict_matrix_every_cell() {
        let paper = [
            ". r r r r r r x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            "x x x x x x x x",
        ];
        let ws = [
            ". r r r r r . x",
            "r . . . . . . x",
            "r . x x x x x x",
            "r . x x x x x x",
            "r . x x x x x x",
            "r . x x x x x x",
            ". . x x x x x x",
            "x x x x x x x x",
        ];
        let ser = [
            ". r r r r r . x",
            "r . x x x x . x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            "r x x x x x x x",
            ". . x x x x x x",
            "x x x x x x x x",
        ];
        for (kind, table) in [
            (RuleKind::Paper, paper),
            (RuleKind::DeltaWriteSerializable, ws),
            (RuleKind::DeltaSerializable, ser),
            (RuleKind::DeltaRs, ser),
        ] {
            for read_write in [true, false] {
                let rules = Rules::new(kind, read_write);
                for (i, row) in table.iter().enumerate() {
                    let cells: Vec<&str> = row.split(' ').collect();
                    assert_eq!(cells.len(), MODE_COUNT);
                    for (j, c) in cells.iter().enumerate() {
                        let expected = match *c {
                            "x" => true,
                            "." => false,
                            "r" => read_write,
                            other => panic!("bad cell {other}"),
                        };
                        let (a, b) = (Mode::ALL[i], Mode::ALL[j]);
                        assert_eq!(
                            rules.modes_conflict(a, b),
                            expected,
                            "{kind:?} read_write={read_write}: {a} vs {b}"
                        );
                        assert_eq!(rules.modes_conflict(a, b), rules.modes_conflict(b, a));
                    }
                }
            }
        }
    }

    #[test]
    fn parse_names() {
        for k in [RuleKind::Paper, RuleKind::DeltaWriteSerializable, RuleKind::DeltaSerializable, RuleKind::DeltaRs] {
            assert_eq!(RuleKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(RuleKind::parse("nope"), None);
    }
}
