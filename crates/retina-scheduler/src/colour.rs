//! Graph colouring of a conflict (sub)graph: every colour class is a batch of
//! tasks that may run together.
//!
//! - first-fit **greedy** in task order, as in the paper's Algorithm 1: O(n + m);
//! - **smallest-last** (Matula–Beck degeneracy order, Batagelj–Zaversnik bins):
//!   O(n + m), at most degeneracy + 1 colours;
//! - **DSatur** (Brélaz) with a lazy max-heap on (saturation, degree): O(m log m).
//!   DSatur is a heuristic and on rare graphs first-fit does better, so
//!   [`colour`] keeps whichever of DSatur and greedy uses fewer colours: the DSatur
//!   result is then never worse than greedy's, which the batch counts rely on.

use std::collections::{BinaryHeap, HashSet};

/// Which colouring algorithm to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Colouring {
    /// First-fit in task order (the paper).
    Greedy,
    /// DSatur (never worse than greedy, see module docs).
    Dsatur,
    /// Smallest-last ordering, then first-fit.
    SmallestLast,
}

impl Colouring {
    /// All algorithms, for reports that compare them.
    pub const ALL: [Colouring; 3] = [Colouring::Greedy, Colouring::Dsatur, Colouring::SmallestLast];

    /// Parses `greedy`, `dsatur`, `smallest-last`.
    pub fn parse(s: &str) -> Option<Colouring> {
        match s.to_ascii_lowercase().as_str() {
            "greedy" | "first-fit" => Some(Colouring::Greedy),
            "dsatur" => Some(Colouring::Dsatur),
            "smallest-last" | "smallest_last" | "sl" => Some(Colouring::SmallestLast),
            _ => None,
        }
    }

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Colouring::Greedy => "greedy",
            Colouring::Dsatur => "dsatur",
            Colouring::SmallestLast => "smallest-last",
        }
    }
}

/// A small undirected graph on local vertex ids `0..n` in CSR form.
/// Invariant: symmetric (u in N(v) iff v in N(u)), no self loops.
#[derive(Debug, Clone, Default)]
pub struct LocalGraph {
    offsets: Vec<u32>,
    nbrs: Vec<u32>,
}

impl LocalGraph {
    /// Builds from symmetric adjacency lists.
    pub fn from_adjacency(adj: &[Vec<u32>]) -> Self {
        let mut offsets = Vec::with_capacity(adj.len() + 1);
        let mut nbrs = Vec::new();
        offsets.push(0);
        for list in adj {
            nbrs.extend_from_slice(list);
            offsets.push(nbrs.len() as u32);
        }
        Self { offsets, nbrs }
    }

    /// Builds from offsets and neighbour array (already CSR).
    pub fn from_csr(offsets: Vec<u32>, nbrs: Vec<u32>) -> Self {
        Self { offsets, nbrs }
    }

    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True when there are no vertices.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Neighbours of `v`.
    pub fn neighbours(&self, v: u32) -> &[u32] {
        &self.nbrs[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }

    fn degree(&self, v: u32) -> u32 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }
}

/// Colours `g` with `algo`; returns per-vertex colours (0-based, dense) and the
/// number of colours.
pub fn colour(g: &LocalGraph, algo: Colouring) -> (Vec<u32>, u32) {
    match algo {
        Colouring::Greedy => greedy_in_order(g, 0..g.len() as u32),
        Colouring::SmallestLast => {
            let mut order = smallest_last_order(g);
            order.reverse();
            greedy_in_order(g, order.into_iter())
        }
        Colouring::Dsatur => {
            let d = dsatur(g);
            let gr = colour(g, Colouring::Greedy);
            if gr.1 < d.1 {
                gr
            } else {
                d
            }
        }
    }
}

/// First-fit: each vertex, in `order`, takes the smallest colour no coloured
/// neighbour has.
fn greedy_in_order(g: &LocalGraph, order: impl Iterator<Item = u32>) -> (Vec<u32>, u32) {
    const NONE: u32 = u32::MAX;
    let n = g.len();
    let mut colours = vec![NONE; n];
    let mut mark = vec![NONE; n + 1];
    let mut count = 0;
    for v in order {
        for &u in g.neighbours(v) {
            let c = colours[u as usize];
            if c != NONE {
                mark[c as usize] = v;
            }
        }
        let c = (0..).find(|&c| mark[c as usize] != v).unwrap_or(0);
        colours[v as usize] = c;
        count = count.max(c + 1);
    }
    (colours, count)
}

/// Degeneracy order: vertices in the order they are removed when repeatedly
/// deleting a vertex of minimum remaining degree (Batagelj–Zaversnik bins).
fn smallest_last_order(g: &LocalGraph) -> Vec<u32> {
    let n = g.len();
    let mut deg: Vec<u32> = (0..n as u32).map(|v| g.degree(v)).collect();
    let maxd = deg.iter().copied().max().unwrap_or(0) as usize;
    let mut bin = vec![0u32; maxd + 2];
    for &d in &deg {
        bin[d as usize] += 1;
    }
    let mut start = 0;
    for b in bin.iter_mut() {
        let cnt = *b;
        *b = start;
        start += cnt;
    }
    let mut pos = vec![0u32; n];
    let mut vert = vec![0u32; n];
    for v in 0..n {
        let d = deg[v] as usize;
        pos[v] = bin[d];
        vert[pos[v] as usize] = v as u32;
        bin[d] += 1;
    }
    for d in (1..=maxd + 1).rev() {
        bin[d] = bin[d - 1];
    }
    bin[0] = 0;
    for i in 0..n {
        let v = vert[i];
        for &u in g.neighbours(v) {
            let (du, dv) = (deg[u as usize], deg[v as usize]);
            if du > dv {
                // Move u to the front of its bin, then shrink the bin.
                let pu = pos[u as usize];
                let pw = bin[du as usize];
                let w = vert[pw as usize];
                if u != w {
                    vert[pu as usize] = w;
                    pos[w as usize] = pu;
                    vert[pw as usize] = u;
                    pos[u as usize] = pw;
                }
                bin[du as usize] += 1;
                deg[u as usize] -= 1;
            }
        }
    }
    vert
}

/// DSatur: repeatedly colour the uncoloured vertex with the most distinct
/// neighbour colours (ties: higher degree, then lower id) with its smallest free
/// colour. Heap entries are lazy: a stale entry (vertex already coloured or its
/// saturation has grown since) is skipped when popped.
fn dsatur(g: &LocalGraph) -> (Vec<u32>, u32) {
    const NONE: u32 = u32::MAX;
    let n = g.len();
    let mut colours = vec![NONE; n];
    let mut sat = vec![0u32; n];
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    let mut heap: BinaryHeap<(u32, u32, std::cmp::Reverse<u32>)> =
        (0..n as u32).map(|v| (0, g.degree(v), std::cmp::Reverse(v))).collect();
    let mut mark = vec![NONE; n + 1];
    let mut count = 0;
    while let Some((s, _, std::cmp::Reverse(v))) = heap.pop() {
        if colours[v as usize] != NONE || s != sat[v as usize] {
            continue;
        }
        for &u in g.neighbours(v) {
            let c = colours[u as usize];
            if c != NONE {
                mark[c as usize] = v;
            }
        }
        let c = (0..).find(|&c| mark[c as usize] != v).unwrap_or(0);
        colours[v as usize] = c;
        count = count.max(c + 1);
        for &u in g.neighbours(v) {
            if colours[u as usize] == NONE && seen.insert((u, c)) {
                sat[u as usize] += 1;
                heap.push((sat[u as usize], g.degree(u), std::cmp::Reverse(u)));
            }
        }
    }
    (colours, count)
}

/// Whether `colours` is a proper colouring of `g`.
pub fn is_proper(g: &LocalGraph, colours: &[u32]) -> bool {
    (0..g.len() as u32).all(|v| g.neighbours(v).iter().all(|&u| colours[u as usize] != colours[v as usize]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn graph(n: usize, edges: &[(u32, u32)]) -> LocalGraph {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges {
            if a != b && !adj[a as usize].contains(&b) {
                adj[a as usize].push(b);
                adj[b as usize].push(a);
            }
        }
        LocalGraph::from_adjacency(&adj)
    }

    #[test]
    fn known_graphs() {
        // A 5-cycle needs 3 colours; a bipartite crown graph fools first-fit.
        let c5 = graph(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]);
        for algo in Colouring::ALL {
            let (c, k) = colour(&c5, algo);
            assert!(is_proper(&c5, &c));
            assert_eq!(k, 3, "{algo:?}");
        }
        // Crown graph on 2x4 vertices ordered a0 b0 a1 b1 ...: ai ~ bj for i != j.
        let mut e = Vec::new();
        for i in 0..4u32 {
            for j in 0..4u32 {
                if i != j {
                    e.push((2 * i, 2 * j + 1));
                }
            }
        }
        let crown = graph(8, &e);
        assert_eq!(colour(&crown, Colouring::Greedy).1, 4);
        assert_eq!(colour(&crown, Colouring::Dsatur).1, 2);
        assert_eq!(colour(&graph(0, &[]), Colouring::Dsatur).1, 0);
    }

    proptest! {
        #[test]
        fn colourings_are_proper_and_dsatur_never_worse(n in 1usize..40, raw in proptest::collection::vec((0u32..40, 0u32..40), 0..200)) {
            let edges: Vec<(u32, u32)> = raw.into_iter().map(|(a, b)| (a % n as u32, b % n as u32)).collect();
            let g = graph(n, &edges);
            let mut counts = Vec::new();
            for algo in Colouring::ALL {
                let (c, k) = colour(&g, algo);
                prop_assert!(is_proper(&g, &c), "{:?} not proper", algo);
                prop_assert!(c.iter().all(|&x| x < k));
                counts.push(k);
            }
            prop_assert!(counts[1] <= counts[0], "dsatur {} > greedy {}", counts[1], counts[0]);
            // Smallest-last is bounded by degeneracy + 1 <= max degree + 1.
            let maxdeg = (0..n as u32).map(|v| g.neighbours(v).len() as u32).max().unwrap_or(0);
            prop_assert!(counts[2] <= maxdeg + 1);
        }
    }
}
