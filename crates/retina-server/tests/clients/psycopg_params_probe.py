"""Binds parameters of every common Python type through psycopg 3, as applications do.

psycopg declares each parameter's type (float8 for a float, numeric for a Decimal)
and sends dates, timestamps, UUIDs and bytes in PostgreSQL's binary format; `%b`
sends every parameter in binary. Retina must plan with the declared types (a float
in `%s * 2` is not an integer) and read the binary formats.

Usage: python psycopg_params_probe.py HOST PORT
Prints one JSON object: each step's result as repr(), or {"error": ...} for a step
that failed (the exit status is then 1). Run by crates/retina-server/tests/clients.rs.
"""

import datetime
import decimal
import json
import sys
import traceback
import uuid

import psycopg


def main() -> int:
    host, port = sys.argv[1], sys.argv[2]
    results = {}
    failed = False
    connection = psycopg.connect(host=host, port=port, user="retina", dbname="retina", autocommit=True)

    def step(name, sql, params):
        nonlocal failed
        try:
            rows = connection.execute(sql, params).fetchall()
            results[name] = repr([tuple(row) for row in rows])
        except Exception as error:  # every failure is reported, none stops the rest
            failed = True
            results[name] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc(file=sys.stderr)

    step("float_times_two", "SELECT %s * 2", (1.5,))
    step("float_bound_on_int_column", "SELECT count(*) FROM shop.items WHERE qty < %s", (15.5,))
    step("decimal", "SELECT %s", (decimal.Decimal("12.34"),))
    step("int", "SELECT %s + 1", (41,))
    step("text", "SELECT %s", ("plain",))
    step("date", "SELECT %s", (datetime.date(2024, 3, 1),))
    step("timestamp", "SELECT %s", (datetime.datetime(2024, 3, 1, 10, 15, 30, 123456),))
    step(
        "timestamptz",
        "SELECT %s",
        (datetime.datetime(2024, 3, 1, 10, 15, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=1))),),
    )
    step("uuid", "SELECT %s", (uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),))
    step("bytes", "SELECT %s", (b"\x01\xff",))
    step("binary_int_on_key", "SELECT id, name FROM shop.items WHERE id = %b", (3,))
    step("binary_float", "SELECT %b * 2", (1.25,))
    step("binary_decimal", "SELECT %b", (decimal.Decimal("-1234.5"),))
    step("bigint_on_int_column", "SELECT count(*) FROM shop.items WHERE qty = %s", (2**40 + 1,))
    step("limit", "SELECT id FROM shop.items ORDER BY id LIMIT %s OFFSET %s", (2, 1))
    # More digits than the placeholder's scale: refused, never rounded.
    try:
        connection.execute("SELECT %s", (decimal.Decimal("0.12345678901"),)).fetchall()
        failed = True
        results["decimal_too_precise"] = "no error"
    except psycopg.Error as error:
        results["decimal_too_precise"] = f"{error.sqlstate}: {str(error).splitlines()[0]}"

    # COPY TO STDOUT, as applications export: text rows, and binary rows read back
    # with the types psycopg is told.
    def copy_text():
        with connection.cursor() as cursor:
            with cursor.copy("COPY (SELECT id, name FROM shop.items WHERE id <= 2 ORDER BY id) TO STDOUT") as copy:
                return repr(b"".join(bytes(block) for block in copy))

    def copy_binary():
        with connection.cursor() as cursor:
            with cursor.copy("COPY (SELECT id, name, qty FROM shop.items WHERE id <= 2 ORDER BY id) TO STDOUT (FORMAT binary)") as copy:
                copy.set_types(["int8", "text", "int4"])
                return repr(list(copy.rows()))

    # psycopg prepares a query by itself after five runs, and then sends
    # DEALLOCATE ALL when a transaction is rolled back.
    def prepared_then_rolled_back():
        with psycopg.connect(host=host, port=port, user="retina", dbname="retina") as tx:
            counts = [tx.execute("SELECT count(*) FROM shop.items WHERE id < %s", (n,)).fetchone()[0] for n in range(2, 9)]
            tx.rollback()
            counts.append(tx.execute("SELECT count(*) FROM shop.items WHERE id < %s", (20,)).fetchone()[0])
            return repr(counts)

    for name, run in [("copy_text", copy_text), ("copy_binary", copy_binary), ("prepared_then_rolled_back", prepared_then_rolled_back)]:
        try:
            results[name] = run()
        except Exception as error:
            failed = True
            results[name] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc(file=sys.stderr)
    results["psycopg"] = psycopg.__version__
    print(json.dumps(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
