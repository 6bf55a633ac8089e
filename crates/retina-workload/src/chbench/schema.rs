//! The TPC-C tables of the CH-benCHmark, as Retina table schemas. Every table has a
//! `fresh_ts` column (microseconds since the Unix epoch) set when its row version was
//! written at the source: the HyBench way to measure freshness from a query.

use arrow_schema::{DataType, TimeUnit};
use retina_core::{CoreResult, Engine, TableId, TableSchema};

pub const WAREHOUSE: &str = "chbench.warehouse";
pub const DISTRICT: &str = "chbench.district";
pub const CUSTOMER: &str = "chbench.customer";
pub const ITEM: &str = "chbench.item";
pub const STOCK: &str = "chbench.stock";
pub const ORDERS: &str = "chbench.orders";
pub const NEW_ORDER: &str = "chbench.new_order";
pub const ORDER_LINE: &str = "chbench.order_line";
pub const HISTORY: &str = "chbench.history";

/// Money: decimal(12, 2).
pub(crate) const MONEY: DataType = DataType::Decimal128(12, 2);

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The nine schemas, in a fixed order (the order of [`ChBenchTables`]).
pub fn schemas() -> Vec<TableSchema> {
    use DataType::*;
    let fresh = ("fresh_ts", Int64, false);
    let table = |name: &str, columns: Vec<(&str, DataType, bool)>, key: &[&str]| {
        TableSchema::from_columns(name, &columns, key).expect("built-in schemas are valid")
    };
    vec![
        table(WAREHOUSE, vec![("w_id", Int32, false), ("w_name", Utf8, false), ("w_tax", Decimal128(4, 4), false), ("w_ytd", MONEY, false), fresh.clone()], &["w_id"]),
        table(
            DISTRICT,
            vec![("d_w_id", Int32, false), ("d_id", Int32, false), ("d_name", Utf8, false), ("d_tax", Decimal128(4, 4), false), ("d_ytd", MONEY, false), ("d_next_o_id", Int32, false), fresh.clone()],
            &["d_w_id", "d_id"],
        ),
        table(
            CUSTOMER,
            vec![
                ("c_w_id", Int32, false), ("c_d_id", Int32, false), ("c_id", Int32, false), ("c_last", Utf8, false),
                ("c_state", Utf8, false), ("c_credit", Utf8, false), ("c_balance", MONEY, false),
                ("c_ytd_payment", MONEY, false), ("c_payment_cnt", Int32, false), ("c_delivery_cnt", Int32, false), fresh.clone(),
            ],
            &["c_w_id", "c_d_id", "c_id"],
        ),
        table(ITEM, vec![("i_id", Int32, false), ("i_name", Utf8, false), ("i_price", Decimal128(5, 2), false), ("i_data", Utf8, false), fresh.clone()], &["i_id"]),
        table(
            STOCK,
            vec![("s_w_id", Int32, false), ("s_i_id", Int32, false), ("s_quantity", Int32, false), ("s_ytd", Int32, false), ("s_order_cnt", Int32, false), ("s_remote_cnt", Int32, false), fresh.clone()],
            &["s_w_id", "s_i_id"],
        ),
        table(
            ORDERS,
            vec![("o_w_id", Int32, false), ("o_d_id", Int32, false), ("o_id", Int32, false), ("o_c_id", Int32, false), ("o_entry_d", timestamp(), false), ("o_carrier_id", Int32, true), ("o_ol_cnt", Int32, false), fresh.clone()],
            &["o_w_id", "o_d_id", "o_id"],
        ),
        table(NEW_ORDER, vec![("no_w_id", Int32, false), ("no_d_id", Int32, false), ("no_o_id", Int32, false), fresh.clone()], &["no_w_id", "no_d_id", "no_o_id"]),
        table(
            ORDER_LINE,
            vec![
                ("ol_w_id", Int32, false), ("ol_d_id", Int32, false), ("ol_o_id", Int32, false), ("ol_number", Int32, false),
                ("ol_i_id", Int32, false), ("ol_supply_w_id", Int32, false), ("ol_delivery_d", timestamp(), true),
                ("ol_quantity", Int32, false), ("ol_amount", Decimal128(6, 2), false), fresh.clone(),
            ],
            &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"],
        ),
        table(
            HISTORY,
            vec![("h_id", Int64, false), ("h_c_id", Int32, false), ("h_c_d_id", Int32, false), ("h_c_w_id", Int32, false), ("h_date", timestamp(), false), ("h_amount", MONEY, false), fresh],
            &["h_id"],
        ),
    ]
}

/// The table ids of the nine tables in one engine.
#[derive(Clone, Copy, Debug)]
pub struct ChBenchTables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub item: TableId,
    pub stock: TableId,
    pub orders: TableId,
    pub new_order: TableId,
    pub order_line: TableId,
    pub history: TableId,
}

impl ChBenchTables {
    /// Creates the tables in `engine`.
    pub fn create(engine: &Engine) -> CoreResult<Self> {
        let ids: Vec<TableId> = schemas().into_iter().map(|s| engine.create_table(s)).collect::<CoreResult<_>>()?;
        Ok(Self::from_ids(&ids))
    }

    /// Ids in the order of [`schemas`]; used when the tables already exist elsewhere.
    pub fn from_ids(ids: &[TableId]) -> Self {
        Self {
            warehouse: ids[0],
            district: ids[1],
            customer: ids[2],
            item: ids[3],
            stock: ids[4],
            orders: ids[5],
            new_order: ids[6],
            order_line: ids[7],
            history: ids[8],
        }
    }

    pub fn all(&self) -> [TableId; 9] {
        [self.warehouse, self.district, self.customer, self.item, self.stock, self.orders, self.new_order, self.order_line, self.history]
    }
}
