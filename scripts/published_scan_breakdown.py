#!/usr/bin/env python3
"""Where a published table's read time goes: the same query through each reader and
through the bare data files, so the deletion vectors' share can be read off.

usage: published_scan_breakdown.py LAKE_DIR TABLE [REPETITIONS]

Runs, alternating, REPETITIONS times (default 7): DuckDB `read_parquet` over a clean
copy of the visible rows and over the table's data files with the DVs ignored,
`delta_scan` and `iceberg_scan` (count and the sum of every numeric column, and
count alone), and Polars `scan_delta` with deltalake's `deletion_vectors()` (what
Polars calls to get the DVs) timed on its own. Prints one JSON object of medians in ms.
"""
import json
import os
import statistics
import sys
import time

import polars as pl
from deltalake import DeltaTable

from published_scan_bench import open_published


def main():
    lake, table = os.path.abspath(sys.argv[1]), sys.argv[2]
    repetitions = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    delta, iceberg, con, clean, columns = open_published(lake, table)
    sums = ", ".join(f"sum({c})" for c in columns)
    sql = {
        "duckdb_clean_copy": f"SELECT count(*), {sums} FROM read_parquet('{clean}')",
        "duckdb_files_dvs_ignored": f"SELECT count(*), {sums} FROM read_parquet('{delta}/*.parquet')",
        "duckdb_delta_scan": f"SELECT count(*), {sums} FROM delta_scan('{delta}')",
        "duckdb_iceberg_scan": f"SELECT count(*), {sums} FROM iceberg_scan('{iceberg}')",
        "duckdb_delta_scan_count": f"SELECT count(*) FROM delta_scan('{delta}')",
        "duckdb_iceberg_scan_count": f"SELECT count(*) FROM iceberg_scan('{iceberg}')",
    }
    steps = {name: (lambda q=q: con.execute(q).fetchall()) for name, q in sql.items()}
    steps["polars_scan_delta"] = lambda: pl.scan_delta(delta).select([pl.len()] + [pl.col(c).sum() for c in columns]).collect()
    steps["deltalake_deletion_vectors"] = lambda: pl.DataFrame(DeltaTable(delta).deletion_vectors())
    times = {name: [] for name in steps}
    for _ in range(repetitions):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append((time.perf_counter() - start) * 1000)
    out = {"table": table, "repetitions": repetitions}
    out.update({name: round(statistics.median(t), 2) for name, t in times.items()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
