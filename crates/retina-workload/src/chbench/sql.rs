//! The analytical queries of the CH-benCHmark as SQL, adapted to Retina's built-in
//! CH-benCHmark-like schema (`chbench.*`: the nine TPC-C tables, no supplier, nation
//! or region). Every ORDER BY is total, so two engines that agree on the data agree
//! on the result row for row, LIMIT included.

/// A named query.
#[derive(Clone, Copy, Debug)]
pub struct NamedQuery {
    pub name: &'static str,
    pub sql: &'static str,
}

/// The CH-benCHmark queries that fit the schema.
pub const QUERIES: &[NamedQuery] = &[
    NamedQuery {
        name: "CH-Q1",
        sql: "SELECT ol_number, sum(ol_quantity) AS sum_qty, sum(ol_amount) AS sum_amount, \
              avg(ol_quantity) AS avg_qty, avg(ol_amount) AS avg_amount, count(*) AS count_order \
              FROM chbench.order_line WHERE ol_delivery_d > TIMESTAMP '2007-01-02 00:00:00' \
              GROUP BY ol_number ORDER BY ol_number",
    },
    NamedQuery {
        name: "CH-Q3",
        sql: "SELECT ol_o_id, ol_w_id, ol_d_id, sum(ol_amount) AS revenue, o_entry_d \
              FROM chbench.customer, chbench.new_order, chbench.orders, chbench.order_line \
              WHERE c_state LIKE 'C%' AND c_id = o_c_id AND c_w_id = o_w_id AND c_d_id = o_d_id \
              AND no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id \
              AND ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
              AND o_entry_d > TIMESTAMP '2007-01-02 00:00:00' \
              GROUP BY ol_o_id, ol_w_id, ol_d_id, o_entry_d \
              ORDER BY revenue DESC, o_entry_d, ol_o_id, ol_w_id, ol_d_id LIMIT 20",
    },
    NamedQuery {
        name: "CH-Q4",
        sql: "SELECT o_ol_cnt, count(*) AS order_count FROM chbench.orders \
              WHERE o_entry_d >= TIMESTAMP '2007-01-02 00:00:00' AND EXISTS ( \
                SELECT * FROM chbench.order_line WHERE o_id = ol_o_id AND o_w_id = ol_w_id \
                AND o_d_id = ol_d_id AND ol_delivery_d >= o_entry_d) \
              GROUP BY o_ol_cnt ORDER BY o_ol_cnt",
    },
    NamedQuery {
        name: "CH-Q6",
        sql: "SELECT sum(ol_amount) AS revenue FROM chbench.order_line \
              WHERE ol_delivery_d >= TIMESTAMP '1999-01-01 00:00:00' AND ol_quantity BETWEEN 1 AND 100000",
    },
    NamedQuery {
        name: "CH-Q12",
        sql: "SELECT o_ol_cnt, \
              sum(CASE WHEN o_carrier_id = 1 OR o_carrier_id = 2 THEN 1 ELSE 0 END) AS high_line_count, \
              sum(CASE WHEN o_carrier_id <> 1 AND o_carrier_id <> 2 THEN 1 ELSE 0 END) AS low_line_count \
              FROM chbench.orders, chbench.order_line \
              WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id AND o_entry_d <= ol_delivery_d \
              GROUP BY o_ol_cnt ORDER BY o_ol_cnt",
    },
    NamedQuery {
        name: "CH-Q13",
        sql: "SELECT c_count, count(*) AS custdist FROM ( \
                SELECT c_w_id, c_d_id, c_id, count(o_id) AS c_count \
                FROM chbench.customer LEFT OUTER JOIN chbench.orders \
                ON (c_w_id = o_w_id AND c_d_id = o_d_id AND c_id = o_c_id AND o_carrier_id > 8) \
                GROUP BY c_w_id, c_d_id, c_id) AS c_orders \
              GROUP BY c_count ORDER BY custdist DESC, c_count DESC",
    },
    NamedQuery {
        name: "CH-Q14",
        sql: "SELECT 100.00 * sum(CASE WHEN i_data LIKE 'data-1%' THEN ol_amount ELSE 0 END) \
              / (1 + sum(ol_amount)) AS promo_revenue \
              FROM chbench.order_line, chbench.item \
              WHERE ol_i_id = i_id AND ol_delivery_d >= TIMESTAMP '2007-01-02 00:00:00'",
    },
    NamedQuery {
        name: "CH-Q17",
        sql: "SELECT sum(ol_amount) / 2.0 AS avg_yearly FROM chbench.order_line, ( \
                SELECT i_id, avg(ol_quantity) AS a FROM chbench.item, chbench.order_line \
                WHERE i_data LIKE 'data-1%' AND ol_i_id = i_id GROUP BY i_id) t \
              WHERE ol_i_id = t.i_id AND ol_quantity < t.a",
    },
    NamedQuery {
        name: "CH-Q18",
        sql: "SELECT c_last, c_id, o_id, o_entry_d, o_ol_cnt, sum(ol_amount) AS amount_sum \
              FROM chbench.customer, chbench.orders, chbench.order_line \
              WHERE c_id = o_c_id AND c_w_id = o_w_id AND c_d_id = o_d_id \
              AND ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
              GROUP BY o_id, o_w_id, o_d_id, c_id, c_last, o_entry_d, o_ol_cnt \
              HAVING sum(ol_amount) > 200 \
              ORDER BY amount_sum DESC, o_entry_d, o_id, o_w_id, o_d_id LIMIT 100",
    },
    NamedQuery {
        name: "CH-Q19",
        sql: "SELECT sum(ol_amount) AS revenue FROM chbench.order_line, chbench.item \
              WHERE (ol_i_id = i_id AND i_data LIKE 'data-1%' AND ol_quantity >= 1 AND ol_quantity <= 10 \
                     AND i_price BETWEEN 1 AND 400000 AND ol_w_id IN (1, 2, 3)) \
                 OR (ol_i_id = i_id AND i_data LIKE 'data-2%' AND ol_quantity >= 1 AND ol_quantity <= 10 \
                     AND i_price BETWEEN 1 AND 400000 AND ol_w_id IN (1, 2, 4))",
    },
    NamedQuery {
        name: "CH-Q22",
        sql: "SELECT substr(c_state, 1, 1) AS country, count(*) AS numcust, sum(c_balance) AS totacctbal \
              FROM chbench.customer \
              WHERE substr(c_state, 1, 1) IN ('C', 'N', 'T', 'W') \
              AND c_balance > (SELECT avg(c_balance) FROM chbench.customer WHERE c_balance > 0.00) \
              AND NOT EXISTS (SELECT * FROM chbench.orders WHERE o_c_id = c_id AND o_w_id = c_w_id AND o_d_id = c_d_id) \
              GROUP BY substr(c_state, 1, 1) ORDER BY country",
    },
    NamedQuery {
        name: "stock-level",
        sql: "SELECT count(*) AS low_stock FROM chbench.stock WHERE s_quantity < 20",
    },
];

/// Cross-table consistency: undelivered orders (carrier null) and new_order rows change
/// in the same transactions, so every snapshot sees the two counts equal.
pub const UNDELIVERED_CONSISTENCY: &str = "SELECT \
    (SELECT count(*) FROM chbench.new_order) AS new_orders, \
    (SELECT count(*) FROM chbench.orders WHERE o_carrier_id IS NULL) AS undelivered";

/// Freshness (HyBench method): the newest source time visible in a table that most
/// transactions touch.
pub const NEWEST_FRESH_TS: &str = "SELECT max(fresh_ts) AS newest FROM chbench.district";
