//! Analytical queries of the CH-benCHmark, written against the snapshot-scan API
//! (the SQL versions are in [`super::sql`]). Each runs on one
//! snapshot shared by every table it reads.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use retina_core::{CoreResult, Engine, Snapshot, TableId};

use crate::chbench::ChBenchTables;

/// CH-Q1: per order-line number, sum of quantity and amount and the line count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Q1Row {
    pub ol_number: i32,
    pub sum_quantity: i64,
    pub sum_amount_cents: i128,
    pub count: u64,
}

pub fn ch_q1(engine: &Engine, tables: &ChBenchTables, snapshot: &Snapshot) -> CoreResult<Vec<Q1Row>> {
    // ol_number, ol_quantity, ol_amount
    let batches = engine.scan(tables.order_line, snapshot, Some(&[3, 7, 8]))?;
    let mut groups: BTreeMap<i32, Q1Row> = BTreeMap::new();
    for batch in &batches {
        let number = batch.column(0).as_primitive::<Int32Type>();
        let quantity = batch.column(1).as_primitive::<Int32Type>();
        let amount = batch.column(2).as_primitive::<Decimal128Type>();
        for row in 0..batch.num_rows() {
            let group = groups.entry(number.value(row)).or_insert_with(|| Q1Row { ol_number: number.value(row), ..Q1Row::default() });
            group.sum_quantity += quantity.value(row) as i64;
            group.sum_amount_cents += amount.value(row);
            group.count += 1;
        }
    }
    Ok(groups.into_values().collect())
}

/// Cross-table consistency: every undelivered order (carrier null) has exactly one
/// new_order row and vice versa, because both change in the same transactions.
/// Returns (new_order rows, orders with a null carrier).
pub fn undelivered_orders(engine: &Engine, tables: &ChBenchTables, snapshot: &Snapshot) -> CoreResult<(u64, u64)> {
    let new_orders = count_rows(&engine.scan(tables.new_order, snapshot, Some(&[2]))?);
    let orders = engine.scan(tables.orders, snapshot, Some(&[5]))?;
    let null_carriers = orders.iter().map(|b| b.column(0).null_count() as u64).sum();
    Ok((new_orders, null_carriers))
}

/// Stock level: stock rows with quantity below `threshold`.
pub fn low_stock(engine: &Engine, tables: &ChBenchTables, snapshot: &Snapshot, threshold: i32) -> CoreResult<u64> {
    let batches = engine.scan(tables.stock, snapshot, Some(&[2]))?;
    Ok(batches
        .iter()
        .map(|b| b.column(0).as_primitive::<Int32Type>().values().iter().filter(|&&q| q < threshold).count() as u64)
        .sum())
}

/// The newest `fresh_ts` (source time, µs) visible in a table's column `column`.
pub fn newest_fresh_ts(engine: &Engine, table: TableId, column: usize, snapshot: &Snapshot) -> CoreResult<Option<i64>> {
    let batches = engine.scan(table, snapshot, Some(&[column]))?;
    Ok(batches.iter().filter_map(|b| b.column(0).as_primitive::<Int64Type>().values().iter().max().copied()).max())
}

fn count_rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}
