#!/usr/bin/env python3
"""Runs the CH-benCHmark queries of `retina bench query --keep-copy DIR` in DuckDB over
the same Parquet files (the static snapshot's export) and prints the median latency per
query and the geomean, for the comparison in BENCHMARKS.md.

    pip install duckdb
    python3 scripts/duckdb_queries.py DIR [--repetitions 5] [--threads 2]
"""
import argparse
import glob
import json
import math
import os
import statistics
import time

import duckdb


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "queries.json")) as f:
        queries = json.load(f)
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    for path in sorted(glob.glob(os.path.join(args.dir, "*.parquet"))):
        schema, table = os.path.basename(path)[: -len(".parquet")].split(".", 1)
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        con.execute(f"CREATE VIEW \"{schema}\".\"{table}\" AS SELECT * FROM read_parquet('{path}')")
    results = []
    for query in queries:
        con.execute(query["sql"]).fetchall()  # warm-up
        times = []
        for _ in range(args.repetitions):
            start = time.perf_counter()
            con.execute(query["sql"]).fetchall()
            times.append((time.perf_counter() - start) * 1000)
        results.append({"name": query["name"], "duckdb_ms": statistics.median(times)})
        print(f'{query["name"]:<12} {statistics.median(times):>10.2f} ms')
    geomean = math.exp(sum(math.log(max(r["duckdb_ms"], 1e-6)) for r in results) / len(results))
    print(f"geomean {geomean:.2f} ms (DuckDB {duckdb.__version__}, {args.threads} threads)")
    print(json.dumps({"duckdb_version": duckdb.__version__, "queries": results, "duckdb_geomean_ms": geomean}))


if __name__ == "__main__":
    main()
