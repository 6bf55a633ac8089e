#!/usr/bin/env python3
"""How many checkpoint segments a lake's tables hold, and what that costs a reader.

usage: segment_count.py LAKE_DIR [REPETITIONS]

Per table: the segments the latest checkpoint lists, the files of the table's
published Delta version (data files and segments), and the median time of DuckDB's
`delta_scan` count(*) over REPETITIONS (default 5). Prints one JSON object.
"""
import glob
import json
import os
import statistics
import sys
import time

import duckdb


def latest(folder, stem):
    return max(glob.glob(os.path.join(folder, f"{stem}-*.json")))


def main():
    lake = os.path.abspath(sys.argv[1])
    repetitions = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    checkpoint = json.load(open(latest(os.path.join(lake, "checkpoints"), "checkpoint")))
    cut_path = os.path.join(lake, "_retina", "published", "latest.json")
    cut = {t["table"]: t for t in json.load(open(cut_path))["tables"]} if os.path.exists(cut_path) else {}
    con = duckdb.connect()
    base = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions", "*", "*")
    con.execute(f"LOAD '{glob.glob(os.path.join(base, 'delta.duckdb_extension'))[0]}'")
    tables = {}
    for table in checkpoint["tables"]:
        name = table["schema"]["name"]
        row = {"segments": sum(len(f["segments"]) for f in table["files"]), "files": len(table["files"])}
        if name in cut:
            delta = os.path.join(lake, cut[name]["delta_path"])
            row["delta_files"] = con.execute(f"SELECT count(DISTINCT filename) FROM delta_scan('{delta}', filename=true)").fetchone()[0]
            times = []
            for _ in range(repetitions):
                started = time.perf_counter()
                con.execute(f"SELECT count(*) FROM delta_scan('{delta}')").fetchone()
                times.append((time.perf_counter() - started) * 1000)
            row["delta_scan_count_ms"] = round(statistics.median(times), 2)
        tables[name] = row
    total = sum(t["segments"] for t in tables.values())
    print(json.dumps({"segments": total, "tables": tables}))


if __name__ == "__main__":
    main()
