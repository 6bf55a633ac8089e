#!/usr/bin/env python3
"""Scan time of a published table (deletion vectors applied by the reader) against the
same visible rows compacted into one clean Parquet file.

usage: published_scan_bench.py LAKE_DIR TABLE [REPETITIONS]

For DuckDB (delta_scan, iceberg_scan) and Polars (scan_delta), each query (count and
the sum of every numeric column) runs REPETITIONS times (default 5) alternating
published and clean; prints one JSON object with medians in ms and the ratios.
"""
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import duckdb
import polars as pl


def open_published(lake, table):
    """The table's Delta path and Iceberg metadata file in the lake's latest cut, a
    DuckDB connection with the delta, avro and iceberg extensions loaded from their
    PyPI packages, a clean Parquet copy of the visible rows, and its numeric columns."""
    cut = json.load(open(os.path.join(lake, "_retina", "published", "latest.json")))
    entry = next(t for t in cut["tables"] if t["table"] == table)
    delta = os.path.join(lake, entry["delta_path"])
    iceberg = os.path.join(lake, entry["iceberg_metadata"])
    con = duckdb.connect()
    base = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions", "*", "*")
    for extension in ["delta", "avro", "iceberg"]:
        con.execute(f"LOAD '{glob.glob(os.path.join(base, extension + '.duckdb_extension'))[0]}'")
    clean = os.path.join(tempfile.mkdtemp(), "clean.parquet")
    con.execute(f"COPY (SELECT * FROM delta_scan('{delta}')) TO '{clean}' (FORMAT parquet)")
    numeric = ("BIGINT", "INTEGER", "SMALLINT", "DOUBLE")
    columns = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{clean}')").fetchall() if r[1] in numeric]
    return delta, iceberg, con, clean, columns


def main():
    lake, table = os.path.abspath(sys.argv[1]), sys.argv[2]
    repetitions = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    delta, iceberg, con, clean, columns = open_published(lake, table)
    sums = ", ".join(f"sum({c})" for c in columns)
    queries = {
        "duckdb_delta": (f"SELECT count(*), {sums} FROM delta_scan('{delta}')", f"SELECT count(*), {sums} FROM read_parquet('{clean}')"),
        "duckdb_iceberg": (f"SELECT count(*), {sums} FROM iceberg_scan('{iceberg}')", f"SELECT count(*), {sums} FROM read_parquet('{clean}')"),
    }
    out = {"table": table, "rows": con.execute(f"SELECT count(*) FROM read_parquet('{clean}')").fetchone()[0]}
    for name, (published, plain) in queries.items():
        times = {"published": [], "clean": []}
        answers = set()
        for _ in range(repetitions):
            for kind, sql in (("published", published), ("clean", plain)):
                start = time.perf_counter()
                answers.add(con.execute(sql).fetchone())
                times[kind].append((time.perf_counter() - start) * 1000)
        assert len(answers) == 1, f"{name}: published and clean answers differ: {answers}"
        p, c = statistics.median(times["published"]), statistics.median(times["clean"])
        out[name] = {"published_ms": round(p, 2), "clean_ms": round(c, 2), "ratio": round(p / c, 3)}
    times = {"published": [], "clean": []}
    for _ in range(repetitions):
        for kind, frame in (("published", lambda: pl.scan_delta(delta)), ("clean", lambda: pl.scan_parquet(clean))):
            start = time.perf_counter()
            frame().select([pl.len()] + [pl.col(c).sum() for c in columns]).collect()
            times[kind].append((time.perf_counter() - start) * 1000)
    p, c = statistics.median(times["published"]), statistics.median(times["clean"])
    out["polars_delta"] = {"published_ms": round(p, 2), "clean_ms": round(c, 2), "ratio": round(p / c, 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
