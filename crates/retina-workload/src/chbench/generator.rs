//! A deterministic CH-benCHmark-like change stream: TPC-C's write transactions,
//! plus restocking and purging of delivered orders, mixed so that about 70% of row
//! changes are updates, 25% inserts and 5% deletes, about 13 per transaction.

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use retina_core::{RowChange, Value};

use super::schema::ChBenchTables;

const DISTRICTS: i32 = 10;

/// Table sizes. `ChBenchScale::for_base_rows` picks one near a target row count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChBenchScale {
    pub warehouses: i32,
    pub items: i32,
    pub customers_per_district: i32,
    pub orders_per_district: i32,
}

impl ChBenchScale {
    /// About `rows` rows in total after the initial load (at least a tiny database).
    pub fn for_base_rows(rows: u64) -> Self {
        // One unit = 1 warehouse with 10 districts, ~250K rows at full size.
        let warehouses = ((rows / 250_000).max(1)).min(1000) as i32;
        let per_warehouse = (rows / warehouses as u64).max(500);
        // Per warehouse: stock = items, and per district c customers + c history rows +
        // o orders + 0.3 o new orders + 10 o order lines; with c = o that is 133 c.
        // Stock takes a quarter, the district tables the rest.
        let items = (per_warehouse / 4).clamp(50, 100_000) as i32;
        let customers_per_district = ((per_warehouse - items as u64) / 133).clamp(5, 3000) as i32;
        let orders_per_district = customers_per_district;
        Self { warehouses, items, customers_per_district, orders_per_district }
    }

    /// Rows the initial load produces (before any transaction).
    pub fn base_rows(&self) -> u64 {
        let w = self.warehouses as u64;
        let districts = w * DISTRICTS as u64;
        let orders = districts * self.orders_per_district as u64;
        let undelivered = districts * undelivered_count(self.orders_per_district) as u64;
        w + districts
            + districts * self.customers_per_district as u64
            + self.items as u64
            + w * self.items as u64
            + orders
            + undelivered
            + orders * INITIAL_LINES as u64
            + districts * self.customers_per_district as u64
    }
}

/// Order lines of initially loaded orders.
const INITIAL_LINES: i32 = 10;

fn undelivered_count(orders: i32) -> i32 {
    orders * 3 / 10
}

/// Kinds of generated transactions, with their share of the mix in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnKind {
    NewOrder,
    Payment,
    Restock,
    Delivery,
    Purge,
}

impl TxnKind {
    const MIX: [(TxnKind, u32); 5] = [
        (TxnKind::NewOrder, 20),
        (TxnKind::Payment, 44),
        (TxnKind::Restock, 30),
        (TxnKind::Delivery, 2),
        (TxnKind::Purge, 4),
    ];
}

struct DistrictState {
    next_order: i32,
    ytd_cents: i64,
    /// Orders with a new_order row, oldest first: (order id, lines).
    undelivered: VecDeque<(i32, i32)>,
    /// Delivered orders not yet purged, oldest first.
    delivered: VecDeque<(i32, i32)>,
}

/// The generator. Same seed and scale, same stream.
pub struct ChBenchGenerator {
    rng: SmallRng,
    scale: ChBenchScale,
    tables: ChBenchTables,
    districts: Vec<DistrictState>,
    next_history: i64,
}

fn i(v: i32) -> Value {
    Value::Int32(v)
}

fn money(cents: i64) -> Value {
    Value::Decimal128(cents as i128)
}

fn text(s: String) -> Value {
    Value::Utf8(s.into())
}

impl ChBenchGenerator {
    pub fn new(seed: u64, scale: ChBenchScale, tables: ChBenchTables) -> Self {
        let districts = (0..scale.warehouses * DISTRICTS)
            .map(|_| DistrictState {
                next_order: scale.orders_per_district + 1,
                ytd_cents: 3_000_000,
                undelivered: VecDeque::new(),
                delivered: VecDeque::new(),
            })
            .collect();
        Self { rng: SmallRng::seed_from_u64(seed), scale, tables, districts, next_history: 1 }
    }

    pub fn scale(&self) -> ChBenchScale {
        self.scale
    }

    /// Streams the initial database as insert-only transactions of up to `chunk` rows.
    pub fn initial_load<E>(
        &mut self,
        fresh_ts: i64,
        chunk: usize,
        mut sink: impl FnMut(Vec<RowChange>) -> Result<(), E>,
    ) -> Result<u64, E> {
        let t = self.tables;
        let scale = self.scale;
        let mut buffer = Vec::with_capacity(chunk);
        let mut total = 0u64;
        let mut emit = |change: RowChange, buffer: &mut Vec<RowChange>| -> Result<(), E> {
            buffer.push(change);
            total += 1;
            if buffer.len() >= chunk {
                sink(std::mem::take(buffer))?;
            }
            Ok(())
        };
        for item in 1..=scale.items {
            let row = vec![i(item), text(format!("item-{item}")), Value::Decimal128(100 + (item as i128 * 37) % 9900), text(format!("data-{}", item % 97)), Value::Int64(fresh_ts)];
            emit(RowChange::Insert { table: t.item, row }, &mut buffer)?;
        }
        for w in 1..=scale.warehouses {
            emit(RowChange::Insert { table: t.warehouse, row: self.warehouse_row(w, 30_000_000, fresh_ts) }, &mut buffer)?;
            for item in 1..=scale.items {
                let quantity = self.rng.random_range(10..=100);
                emit(RowChange::Insert { table: t.stock, row: stock_row(w, item, quantity, 0, 0, fresh_ts) }, &mut buffer)?;
            }
            for d in 1..=DISTRICTS {
                let index = self.district_index(w, d);
                let next = self.districts[index].next_order;
                emit(RowChange::Insert { table: t.district, row: self.district_row(w, d, 3_000_000, next, fresh_ts) }, &mut buffer)?;
                for c in 1..=scale.customers_per_district {
                    emit(RowChange::Insert { table: t.customer, row: customer_row(w, d, c, -1000, 1000, 1, 0, fresh_ts) }, &mut buffer)?;
                    let h = self.next_history;
                    self.next_history += 1;
                    emit(RowChange::Insert { table: t.history, row: history_row(h, w, d, c, 1000, fresh_ts) }, &mut buffer)?;
                }
                let undelivered_from = scale.orders_per_district - undelivered_count(scale.orders_per_district) + 1;
                for o in 1..=scale.orders_per_district {
                    let delivered = o < undelivered_from;
                    let customer = self.rng.random_range(1..=scale.customers_per_district);
                    let carrier = delivered.then(|| self.rng.random_range(1..=10));
                    emit(RowChange::Insert { table: t.orders, row: order_row(w, d, o, customer, carrier, INITIAL_LINES, fresh_ts) }, &mut buffer)?;
                    for number in 1..=INITIAL_LINES {
                        let item = self.rng.random_range(1..=scale.items);
                        let delivery = delivered.then_some(fresh_ts);
                        emit(RowChange::Insert { table: t.order_line, row: order_line_row(w, d, o, number, item, delivery, 5, fresh_ts) }, &mut buffer)?;
                    }
                    if delivered {
                        self.districts[index].delivered.push_back((o, INITIAL_LINES));
                    } else {
                        emit(RowChange::Insert { table: t.new_order, row: vec![i(w), i(d), i(o), Value::Int64(fresh_ts)] }, &mut buffer)?;
                        self.districts[index].undelivered.push_back((o, INITIAL_LINES));
                    }
                }
            }
        }
        if !buffer.is_empty() {
            sink(buffer)?;
        }
        Ok(total)
    }

    /// The next transaction of the mix, its row versions stamped with `fresh_ts`.
    pub fn next_transaction(&mut self, fresh_ts: i64) -> (TxnKind, Vec<RowChange>) {
        let kind = self.pick_kind();
        let changes = match kind {
            TxnKind::NewOrder => self.new_order(fresh_ts),
            TxnKind::Payment => self.payment(fresh_ts),
            TxnKind::Restock => self.restock(fresh_ts),
            TxnKind::Delivery => self.delivery(fresh_ts),
            TxnKind::Purge => self.purge(fresh_ts),
        };
        (kind, changes)
    }

    fn pick_kind(&mut self) -> TxnKind {
        let mut roll = self.rng.random_range(0..100u32);
        for (kind, share) in TxnKind::MIX {
            if roll < share {
                return kind;
            }
            roll -= share;
        }
        TxnKind::Payment
    }

    fn district_index(&self, w: i32, d: i32) -> usize {
        ((w - 1) * DISTRICTS + (d - 1)) as usize
    }

    fn random_district(&mut self) -> (i32, i32) {
        (self.rng.random_range(1..=self.scale.warehouses), self.rng.random_range(1..=DISTRICTS))
    }

    fn warehouse_row(&mut self, w: i32, ytd: i64, fresh_ts: i64) -> Vec<Value> {
        vec![i(w), text(format!("warehouse-{w}")), Value::Decimal128(self.rng.random_range(0..2000)), money(ytd), Value::Int64(fresh_ts)]
    }

    fn district_row(&mut self, w: i32, d: i32, ytd: i64, next_order: i32, fresh_ts: i64) -> Vec<Value> {
        vec![i(w), i(d), text(format!("district-{w}-{d}")), Value::Decimal128(self.rng.random_range(0..2000)), money(ytd), i(next_order), Value::Int64(fresh_ts)]
    }

    fn new_order(&mut self, fresh_ts: i64) -> Vec<RowChange> {
        let t = self.tables;
        let (w, d) = self.random_district();
        let index = self.district_index(w, d);
        let order = self.districts[index].next_order;
        self.districts[index].next_order += 1;
        let ytd = self.districts[index].ytd_cents;
        let lines = self.rng.random_range(5..=15);
        let customer = self.rng.random_range(1..=self.scale.customers_per_district);
        let mut changes = Vec::with_capacity(3 + 2 * lines as usize);
        changes.push(RowChange::Update { table: t.district, key: vec![i(w), i(d)], row: self.district_row(w, d, ytd, order + 1, fresh_ts) });
        changes.push(RowChange::Insert { table: t.orders, row: order_row(w, d, order, customer, None, lines, fresh_ts) });
        changes.push(RowChange::Insert { table: t.new_order, row: vec![i(w), i(d), i(order), Value::Int64(fresh_ts)] });
        let mut items: Vec<i32> = Vec::with_capacity(lines as usize);
        for number in 1..=lines {
            let mut item = self.rng.random_range(1..=self.scale.items);
            while items.contains(&item) && (items.len() as i32) < self.scale.items {
                item = item % self.scale.items + 1;
            }
            items.push(item);
            let quantity = self.rng.random_range(1..=10);
            let stock = self.rng.random_range(10..=100);
            changes.push(RowChange::Update {
                table: t.stock,
                key: vec![i(w), i(item)],
                row: stock_row(w, item, stock, quantity, 1, fresh_ts),
            });
            changes.push(RowChange::Insert { table: t.order_line, row: order_line_row(w, d, order, number, item, None, quantity, fresh_ts) });
        }
        self.districts[index].undelivered.push_back((order, lines));
        changes
    }

    fn payment(&mut self, fresh_ts: i64) -> Vec<RowChange> {
        let t = self.tables;
        let (w, d) = self.random_district();
        let index = self.district_index(w, d);
        let amount = self.rng.random_range(100..=500_000);
        self.districts[index].ytd_cents += amount;
        let ytd = self.districts[index].ytd_cents;
        let c = self.rng.random_range(1..=self.scale.customers_per_district);
        let h = self.next_history;
        self.next_history += 1;
        let balance = self.rng.random_range(-500_000..500_000);
        let payments = self.rng.random_range(1..100);
        vec![
            RowChange::Update { table: t.warehouse, key: vec![i(w)], row: self.warehouse_row(w, ytd * 10, fresh_ts) },
            RowChange::Update { table: t.district, key: vec![i(w), i(d)], row: self.district_row(w, d, ytd, self.districts[index].next_order, fresh_ts) },
            RowChange::Update { table: t.customer, key: vec![i(w), i(d), i(c)], row: customer_row(w, d, c, balance, amount, payments, 0, fresh_ts) },
            RowChange::Insert { table: t.history, row: history_row(h, w, d, c, amount, fresh_ts) },
        ]
    }

    fn restock(&mut self, fresh_ts: i64) -> Vec<RowChange> {
        let t = self.tables;
        let w = self.rng.random_range(1..=self.scale.warehouses);
        let count = 10.min(self.scale.items);
        let start = self.rng.random_range(1..=self.scale.items);
        (0..count)
            .map(|k| {
                let item = (start - 1 + k) % self.scale.items + 1;
                let quantity = self.rng.random_range(50..=150);
                RowChange::Update { table: t.stock, key: vec![i(w), i(item)], row: stock_row(w, item, quantity, 0, 0, fresh_ts) }
            })
            .collect()
    }

    /// Delivers the oldest undelivered order of every district of one warehouse.
    fn delivery(&mut self, fresh_ts: i64) -> Vec<RowChange> {
        let t = self.tables;
        let w = self.rng.random_range(1..=self.scale.warehouses);
        let carrier = self.rng.random_range(1..=10);
        let mut changes = Vec::new();
        for d in 1..=DISTRICTS {
            let index = self.district_index(w, d);
            let Some((order, lines)) = self.districts[index].undelivered.pop_front() else { continue };
            let customer = self.rng.random_range(1..=self.scale.customers_per_district);
            changes.push(RowChange::Delete { table: t.new_order, key: vec![i(w), i(d), i(order)] });
            changes.push(RowChange::Update { table: t.orders, key: vec![i(w), i(d), i(order)], row: order_row(w, d, order, customer, Some(carrier), lines, fresh_ts) });
            for number in 1..=lines {
                let item = self.rng.random_range(1..=self.scale.items);
                changes.push(RowChange::Update {
                    table: t.order_line,
                    key: vec![i(w), i(d), i(order), i(number)],
                    row: order_line_row(w, d, order, number, item, Some(fresh_ts), 5, fresh_ts),
                });
            }
            let balance = self.rng.random_range(-500_000..500_000);
            changes.push(RowChange::Update { table: t.customer, key: vec![i(w), i(d), i(customer)], row: customer_row(w, d, customer, balance, 0, 1, 1, fresh_ts) });
            self.districts[index].delivered.push_back((order, lines));
        }
        changes
    }

    /// Archives the oldest delivered order of a district: deletes it and its lines.
    fn purge(&mut self, fresh_ts: i64) -> Vec<RowChange> {
        let t = self.tables;
        let (w, d) = self.random_district();
        let index = self.district_index(w, d);
        let Some((order, lines)) = self.districts[index].delivered.pop_front() else {
            return self.payment(fresh_ts);
        };
        let mut changes = vec![RowChange::Delete { table: t.orders, key: vec![i(w), i(d), i(order)] }];
        for number in 1..=lines {
            changes.push(RowChange::Delete { table: t.order_line, key: vec![i(w), i(d), i(order), i(number)] });
        }
        changes
    }
}

fn stock_row(w: i32, item: i32, quantity: i32, ytd: i32, orders: i32, fresh_ts: i64) -> Vec<Value> {
    vec![i(w), i(item), i(quantity), i(ytd), i(orders), i(0), Value::Int64(fresh_ts)]
}

#[allow(clippy::too_many_arguments)]
fn customer_row(w: i32, d: i32, c: i32, balance: i64, ytd: i64, payments: i32, deliveries: i32, fresh_ts: i64) -> Vec<Value> {
    const STATES: [&str; 6] = ["CA", "NY", "TX", "WA", "MA", "IL"];
    vec![
        i(w),
        i(d),
        i(c),
        text(format!("LAST{}", c % 1000)),
        text(STATES[(c as usize) % STATES.len()].to_string()),
        text(if c % 10 == 0 { "BC" } else { "GC" }.to_string()),
        money(balance),
        money(ytd),
        i(payments),
        i(deliveries),
        Value::Int64(fresh_ts),
    ]
}

fn order_row(w: i32, d: i32, o: i32, customer: i32, carrier: Option<i32>, lines: i32, fresh_ts: i64) -> Vec<Value> {
    vec![i(w), i(d), i(o), i(customer), Value::TimestampMicros(fresh_ts), carrier.map_or(Value::Null, i), i(lines), Value::Int64(fresh_ts)]
}

#[allow(clippy::too_many_arguments)]
fn order_line_row(w: i32, d: i32, o: i32, number: i32, item: i32, delivery: Option<i64>, quantity: i32, fresh_ts: i64) -> Vec<Value> {
    vec![
        i(w),
        i(d),
        i(o),
        i(number),
        i(item),
        i(w),
        delivery.map_or(Value::Null, Value::TimestampMicros),
        i(quantity),
        Value::Decimal128((quantity as i128) * 1234 % 999_999),
        Value::Int64(fresh_ts),
    ]
}

fn history_row(h: i64, w: i32, d: i32, c: i32, amount: i64, fresh_ts: i64) -> Vec<Value> {
    vec![Value::Int64(h), i(c), i(d), i(w), Value::TimestampMicros(fresh_ts), money(amount), Value::Int64(fresh_ts)]
}
