//! When a checkpoint rewrites a buffered file's newest segments as one.
//!
//! Each checkpoint saves the rows a write buffer got since the previous one as a new
//! segment. A table that changes slowly fills its 65,536-row file over hours, so
//! without merging it would pile up a segment per checkpoint: thousands of tiny
//! Parquet files that every checkpoint lists, recovery reads one by one and the
//! published Delta and Iceberg tables hand to every reader.
//!
//! The policy is size-tiered, as in LSM trees: a segment's tier is the base-8
//! logarithm of its rows, and once the newest segments of the new rows' tier or
//! below number [`MERGE_FANOUT`], they are rewritten with the new rows as one (which
//! may cascade into the tier above). So a file holds at most about
//! `(MERGE_FANOUT - 1)` segments per tier, a few dozen at 65,536 rows, and a row is
//! rewritten about once per tier it climbs, a handful of times. Merging reads
//! nothing: the checkpoint holds the buffered rows in memory and writes them from
//! there.

/// How many segments of one tier are merged into one of the next.
pub(crate) const MERGE_FANOUT: usize = 8;

fn tier(rows: u64) -> u32 {
    rows.max(1).ilog(MERGE_FANOUT as u64)
}

/// How many of a file's segments (their row counts, oldest first) stay as they are
/// when `new_rows` more rows are saved. The ones after them are rewritten together
/// with the new rows as one segment.
pub(crate) fn segments_kept(segment_rows: &[u64], new_rows: u64) -> usize {
    let mut kept = segment_rows.len();
    let mut run = new_rows;
    loop {
        let run_tier = tier(run);
        let start = segment_rows[..kept].iter().rposition(|&rows| tier(rows) > run_tier).map_or(0, |last_higher| last_higher + 1);
        if kept - start + 1 < MERGE_FANOUT {
            return kept;
        }
        run += segment_rows[start..kept].iter().sum::<u64>();
        kept = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `new_rows` through the policy as checkpoints would: the segments left and
    /// every row written, merges included.
    fn simulate(new_rows: impl IntoIterator<Item = u64>) -> (Vec<u64>, u64, usize) {
        let (mut segments, mut written, mut most) = (Vec::new(), 0u64, 0usize);
        for rows in new_rows {
            let kept = segments_kept(&segments, rows);
            let merged: u64 = segments.drain(kept..).sum::<u64>() + rows;
            written += merged;
            segments.push(merged);
            most = most.max(segments.len());
        }
        (segments, written, most)
    }

    #[test]
    fn a_trickle_keeps_few_segments_and_rewrites_each_row_a_few_times() {
        // 50 rows per checkpoint until a 65,536-row file is full: 1,311 checkpoints.
        let checkpoints = 65_536u64.div_ceil(50);
        let (segments, written, most) = simulate((0..checkpoints).map(|_| 50));
        let rows = checkpoints * 50;
        assert_eq!(segments.iter().sum::<u64>(), rows, "every row in exactly one segment");
        assert!(most <= 4 * (MERGE_FANOUT - 1), "at most {most} segments at once");
        assert!(written <= 5 * rows, "{written} rows written for {rows}");
        // One row per checkpoint, the slowest trickle.
        let (segments, written, most) = simulate((0..20_000).map(|_| 1));
        assert_eq!(segments.iter().sum::<u64>(), 20_000);
        assert!(most <= 5 * (MERGE_FANOUT - 1) && written <= 6 * 20_000, "{most} segments, {written} rows written");
    }

    #[test]
    fn a_busy_file_is_not_merged() {
        // A file filled in a few checkpoints of similar size keeps its segments.
        let (segments, written, _) = simulate([20_000, 25_000, 20_536]);
        assert_eq!((segments, written), (vec![20_000, 25_000, 20_536], 65_536));
    }

    #[test]
    fn fanout_segments_of_one_tier_merge_and_larger_ones_stay() {
        assert_eq!(segments_kept(&[], 10), 0);
        assert_eq!(segments_kept(&[10; 6], 10), 6, "seven of a tier: not yet");
        assert_eq!(segments_kept(&[10; 7], 10), 0, "eight: merged");
        assert_eq!(segments_kept(&[5_000, 10, 10, 10, 10, 10, 10, 10], 10), 1, "the large one stays");
        // The merge cascades: seven segments of the merged run's tier join it.
        assert_eq!(segments_kept(&[100, 100, 100, 100, 100, 100, 100, 10, 10, 10, 10, 10, 10, 10], 10), 0);
    }

    proptest::proptest! {
        #[test]
        fn every_row_stays_in_one_segment_and_segments_stay_few(new_rows in proptest::collection::vec(1u64..5_000, 1..400)) {
            let total: u64 = new_rows.iter().sum();
            let (segments, _, _) = simulate(new_rows);
            proptest::prop_assert_eq!(segments.iter().sum::<u64>(), total);
            let tiers = tier(total) as usize + 1;
            proptest::prop_assert!(segments.len() <= tiers * (MERGE_FANOUT - 1), "{} segments for {} rows", segments.len(), total);
        }
    }
}
