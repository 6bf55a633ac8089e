//! The task conflict graph `G_T`: an edge between two tasks when any pair of
//! their accesses conflicts (or one of them is `universal`).
//!
//! [`discover`] builds it through the [`ConflictIndex`] in near-linear time;
//! [`discover_all_pairs`] is the paper's O(n²) definition, kept as the reference
//! the property tests compare against.

use crate::access::Access;
use crate::index::ConflictIndex;
use crate::model::{TaskIdx, Workload};
use crate::rules::Rules;

/// Why two tasks conflict: the first conflicting access pair found (global
/// access ids into `Workload::accesses`), or `None` when one side is universal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Smaller task index.
    pub a: TaskIdx,
    /// Larger task index.
    pub b: TaskIdx,
    /// (access of `a`, access of `b`) that conflict; `None` for a universal task.
    pub reason: Option<(u32, u32)>,
}

/// Undirected conflict graph in CSR form.
///
/// Invariants: `edges` is sorted by `(a, b)` with `a < b` and no duplicates;
/// `offsets.len() == n + 1`; `nbrs[offsets[v]..offsets[v+1]]` are `v`'s
/// neighbours, sorted, each edge appearing in both endpoints' lists.
#[derive(Debug, Clone, Default)]
pub struct ConflictGraph {
    n: usize,
    edges: Vec<Edge>,
    offsets: Vec<u32>,
    nbrs: Vec<TaskIdx>,
}

impl ConflictGraph {
    /// Builds the graph from edges in any order (duplicates allowed: of each
    /// pair, the edge that came first in `edges` is kept — the sort is stable).
    pub fn from_edges(n: usize, mut edges: Vec<Edge>) -> Self {
        for e in &mut edges {
            if e.a > e.b {
                std::mem::swap(&mut e.a, &mut e.b);
                e.reason = e.reason.map(|(x, y)| (y, x));
            }
        }
        edges.sort_by_key(|e| (e.a, e.b));
        edges.dedup_by_key(|e| (e.a, e.b));
        let mut deg = vec![0u32; n + 1];
        for e in &edges {
            deg[e.a as usize] += 1;
            deg[e.b as usize] += 1;
        }
        let mut offsets = vec![0u32; n + 1];
        for v in 0..n {
            offsets[v + 1] = offsets[v] + deg[v];
        }
        let mut fill = offsets.clone();
        let mut nbrs = vec![0 as TaskIdx; edges.len() * 2];
        for e in &edges {
            nbrs[fill[e.a as usize] as usize] = e.b;
            fill[e.a as usize] += 1;
            nbrs[fill[e.b as usize] as usize] = e.a;
            fill[e.b as usize] += 1;
        }
        for v in 0..n {
            nbrs[offsets[v] as usize..offsets[v + 1] as usize].sort_unstable();
        }
        Self { n, edges, offsets, nbrs }
    }

    /// Number of tasks (vertices).
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there are no vertices.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// All edges, sorted.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Neighbours of `v`, sorted.
    pub fn neighbours(&self, v: TaskIdx) -> &[TaskIdx] {
        &self.nbrs[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }

    /// Whether `a` and `b` conflict (binary search, O(log deg)).
    pub fn conflicts(&self, a: TaskIdx, b: TaskIdx) -> bool {
        self.neighbours(a).binary_search(&b).is_ok()
    }

    /// The edge between `a` and `b`, if any.
    pub fn edge(&self, a: TaskIdx, b: TaskIdx) -> Option<&Edge> {
        let key = (a.min(b), a.max(b));
        self.edges.binary_search_by_key(&key, |e| (e.a, e.b)).ok().map(|i| &self.edges[i])
    }

    /// Number of tasks with at least one conflict.
    pub fn conflicting_tasks(&self) -> usize {
        (0..self.n).filter(|&v| self.offsets[v + 1] > self.offsets[v]).count()
    }
}

/// Near-linear conflict discovery through the index (see `index.rs`).
pub fn discover(w: &Workload, rules: &Rules) -> ConflictGraph {
    let primary = w
        .accesses()
        .iter()
        .filter_map(|a| w.primary_partition_column(a.table).map(|c| (a.table, c)))
        .collect();
    let mut index = ConflictIndex::new(*rules, primary);
    let mut edges = Vec::new();
    let mut hits = Vec::new();
    for (id, a) in w.accesses().iter().enumerate() {
        let owner = w.owner(id as u32);
        hits.clear();
        let got = index.insert(owner, a, &mut hits);
        debug_assert_eq!(got, id as u32, "index ids follow workload access ids");
        for &other in &hits {
            edges.push(Edge { a: owner, b: w.owner(other), reason: Some((id as u32, other)) });
        }
    }
    // Several access pairs may explain one edge; keep the most telling one
    // (write/write before read/write) as its reason. `from_edges` sorts stably.
    edges.sort_by_key(|e| e.reason.map(|(x, y)| reads_in(w, x) + reads_in(w, y)).unwrap_or(0));
    add_universal_edges(w, &mut edges);
    ConflictGraph::from_edges(w.len(), edges)
}

fn reads_in(w: &Workload, access: u32) -> u8 {
    u8::from(w.accesses()[access as usize].mode == crate::access::Mode::Read)
}

/// Tasks with unknown accesses conflict with every other task.
fn add_universal_edges(w: &Workload, edges: &mut Vec<Edge>) {
    let n = w.len() as TaskIdx;
    for u in 0..n {
        if w.task(u).universal {
            for v in 0..n {
                if v != u {
                    edges.push(Edge { a: u, b: v, reason: None });
                }
            }
        }
    }
}

/// Whether two accesses conflict by the definition: same table, overlapping
/// partitions, conflicting modes.
pub fn accesses_conflict(x: &Access, y: &Access, rules: &Rules) -> bool {
    x.table == y.table
        && rules.modes_conflict(x.mode, y.mode)
        && rules.effective_spec(x.mode, &x.partitions).overlaps(&rules.effective_spec(y.mode, &y.partitions))
}

/// The paper's all-pairs discovery, O(n² · accesses²): the reference definition.
pub fn discover_all_pairs(w: &Workload, rules: &Rules) -> ConflictGraph {
    let n = w.len() as TaskIdx;
    let mut edges = Vec::new();
    for a in 0..n {
        for b in (a + 1)..n {
            'pair: for (ia, xa) in w.task_access_ids(a).zip(w.task_accesses(a)) {
                for (ib, xb) in w.task_access_ids(b).zip(w.task_accesses(b)) {
                    if accesses_conflict(xa, xb, rules) {
                        edges.push(Edge { a, b, reason: Some((ia, ib)) });
                        break 'pair;
                    }
                }
            }
        }
    }
    add_universal_edges(w, &mut edges);
    ConflictGraph::from_edges(w.len(), edges)
}

/// Human-readable reason of an edge: `table [partitions] MODE vs MODE`.
pub fn describe_edge(w: &Workload, e: &Edge) -> String {
    match e.reason {
        None => "unknown accesses (--assume-conflict)".to_string(),
        Some((x, y)) => {
            let (ax, ay) = (&w.accesses()[x as usize], &w.accesses()[y as usize]);
            let (first, second) = if w.owner(x) == e.a { (ax, ay) } else { (ay, ax) };
            format!(
                "{} [{} | {}] {} vs {}",
                w.names.name(first.table),
                first.partitions.display(&w.names),
                second.partitions.display(&w.names),
                first.mode,
                second.mode
            )
        }
    }
}
