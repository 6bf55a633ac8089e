//! The built-in CH-benCHmark-like workload: schemas, a seeded change generator, and
//! its analytical queries ([`queries`] on the snapshot-scan API, [`sql`] as SQL).

mod generator;
pub mod queries;
mod schema;
pub mod sql;

pub use generator::{ChBenchGenerator, ChBenchScale, TxnKind};
pub use schema::*;

#[cfg(test)]
mod tests {
    use super::*;
    use retina_core::{RowChange, TableId};

    fn tables() -> ChBenchTables {
        ChBenchTables::from_ids(&(0..9).map(TableId).collect::<Vec<_>>())
    }

    fn stream(seed: u64, txns: usize) -> Vec<Vec<RowChange>> {
        let mut generator = ChBenchGenerator::new(seed, ChBenchScale::for_base_rows(20_000), tables());
        generator.initial_load(0, 1000, |_| Ok::<_, ()>(())).expect("load");
        (0..txns).map(|n| generator.next_transaction(n as i64).1).collect()
    }

    #[test]
    fn same_seed_same_stream() {
        assert_eq!(stream(7, 200), stream(7, 200));
        assert_ne!(stream(7, 200), stream(8, 200));
    }

    #[test]
    fn mix_is_about_70_25_5_with_13_changes_per_transaction() {
        let txns = stream(1, 20_000);
        let (mut updates, mut inserts, mut deletes) = (0usize, 0usize, 0usize);
        for change in txns.iter().flatten() {
            match change {
                RowChange::Update { .. } | RowChange::UpdateOrInsert { .. } | RowChange::UpdateKeeping { .. } => updates += 1,
                RowChange::Insert { .. } | RowChange::Upsert { .. } => inserts += 1,
                RowChange::Delete { .. } | RowChange::DeleteIfPresent { .. } => deletes += 1,
            }
        }
        let total = (updates + inserts + deletes) as f64;
        let per_txn = total / txns.len() as f64;
        let share = |n: usize| n as f64 / total;
        assert!((11.0..=15.0).contains(&per_txn), "{per_txn} changes per transaction");
        assert!((0.65..=0.75).contains(&share(updates)), "updates {}", share(updates));
        assert!((0.20..=0.30).contains(&share(inserts)), "inserts {}", share(inserts));
        assert!((0.03..=0.07).contains(&share(deletes)), "deletes {}", share(deletes));
    }

    #[test]
    fn scale_for_base_rows_is_close_to_the_target() {
        for target in [100_000u64, 1_000_000] {
            let rows = ChBenchScale::for_base_rows(target).base_rows() as f64;
            assert!((rows / target as f64 - 1.0).abs() < 0.35, "{rows} rows for target {target}");
        }
        let mut generator = ChBenchGenerator::new(1, ChBenchScale::for_base_rows(30_000), tables());
        let loaded = generator.initial_load(0, 500, |_| Ok::<_, ()>(())).expect("load");
        assert_eq!(loaded, generator.scale().base_rows());
    }
}
