#!/usr/bin/env python3
"""Reads a Delta table with three independent readers and prints what each saw.

usage: read_delta.py TABLE_DIR [VERSION]

Prints one JSON object: for each reader (DuckDB's delta extension, delta-rs's
QueryBuilder, Polars), its column names and its rows as sorted lists of strings, or
the error it raised. The tests compare these with Retina's own snapshot.
"""
import glob
import json
import os
import sys


def normalized(rows):
    return sorted([["" if v is None else str(v) for v in row] for row in rows])


def with_duckdb(path, version):
    import duckdb

    con = duckdb.connect()
    pattern = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions", "*", "*", "delta.duckdb_extension")
    found = glob.glob(pattern)
    if not found:
        raise RuntimeError("duckdb-ext-delta is not installed (pip install duckdb-ext-delta)")
    con.execute(f"LOAD '{found[0]}'")
    if version is None:
        result = con.execute("SELECT * FROM delta_scan(?)", [path])
    else:
        con.execute(f"ATTACH '{path}' AS t (TYPE delta, VERSION {int(version)})")
        result = con.execute("SELECT * FROM t")
    columns = [d[0] for d in result.description]
    return columns, result.fetchall()


def with_deltalake(path, version):
    from deltalake import DeltaTable, QueryBuilder

    import pyarrow

    table = DeltaTable(path) if version is None else DeltaTable(path, version=int(version))
    # An arro3 table; pyarrow takes it through the Arrow C stream interface.
    result = pyarrow.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    return result.column_names, [tuple(r.values()) for r in result.to_pylist()]


def with_polars(path, version):
    import polars

    frame = polars.scan_delta(path, version=None if version is None else int(version)).collect()
    return frame.columns, frame.rows()


def main():
    path = os.path.abspath(sys.argv[1])
    version = sys.argv[2] if len(sys.argv) > 2 else None
    out = {}
    for name, reader in [("duckdb", with_duckdb), ("deltalake", with_deltalake), ("polars", with_polars)]:
        try:
            columns, rows = reader(path, version)
            out[name] = {"columns": list(columns), "rows": normalized(rows)}
        except Exception as error:  # reported, and the test fails on it
            out[name] = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
