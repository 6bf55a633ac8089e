#!/usr/bin/env python3
"""Reads Retina's published Delta tables with three independent readers.

usage: read_delta.py TABLE_DIR [VERSION]   one table (at VERSION)
       read_delta.py --cut LAKE_DIR        every table of the latest published cut,
                                           each at the version the cut names

Prints one JSON object: for each reader (DuckDB's delta extension, delta-rs's
QueryBuilder, Polars), its column names and its rows as sorted lists of strings, or
the error it raised (with --cut: that object per table, and the cut's ts). The
tests compare these with Retina's own snapshot.
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


def read_table(path, version):
    out = {}
    for name, reader in [("duckdb", with_duckdb), ("deltalake", with_deltalake), ("polars", with_polars)]:
        try:
            columns, rows = reader(path, version)
            out[name] = {"columns": list(columns), "rows": normalized(rows)}
        except Exception as error:  # reported, and the test fails on it
            out[name] = {"error": f"{type(error).__name__}: {error}"}
    return out


def read_cut(lake):
    # One consistent cut across tables: each table at the Delta version the cut names.
    with open(os.path.join(lake, "_retina", "published", "latest.json")) as f:
        cut = json.load(f)
    tables = {t["table"]: read_table(os.path.join(lake, t["delta_path"]), t["delta_version"]) for t in cut["tables"]}
    return {"ts": cut["ts"], "tables": tables}


def main():
    if sys.argv[1] == "--cut":
        print(json.dumps(read_cut(os.path.abspath(sys.argv[2]))))
    else:
        version = sys.argv[2] if len(sys.argv) > 2 else None
        print(json.dumps(read_table(os.path.abspath(sys.argv[1]), version)))


if __name__ == "__main__":
    main()
