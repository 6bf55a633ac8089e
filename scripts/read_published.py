#!/usr/bin/env python3
"""Reads Retina's published open tables with independent readers.

usage: read_published.py TABLE_DIR [VERSION]      a Delta table (at VERSION)
       read_published.py --iceberg METADATA_FILE  an Iceberg table's snapshot
       read_published.py --cut LAKE_DIR           every table of the latest published
                                                  cut, in both formats, each at the
                                                  version the cut names

Prints one JSON object: for each reader (Delta: DuckDB's delta extension, delta-rs's
QueryBuilder, Polars; Iceberg: pyiceberg, DuckDB's iceberg extension, Polars), its
column names and its rows as sorted lists of strings, or the error it raised (with
--cut: per table, {"delta": ..., "iceberg": ...}, and the cut's ts). The tests
compare these with Retina's own snapshot.
"""
import glob
import json
import os
import sys

# A lake on an S3-compatible server: its endpoint (credentials test/verysecret, as the
# tests' moto server takes them). DuckDB is not asked then (no httpfs extension here).
S3 = os.environ.get("READ_S3_ENDPOINT")
DELTA_S3 = {"AWS_ENDPOINT_URL": S3, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "verysecret"}
ICEBERG_S3 = {"s3.endpoint": S3, "s3.access-key-id": "test", "s3.secret-access-key": "verysecret", "s3.region": "us-east-1"}


def normalized(rows):
    return sorted([["" if v is None else str(v) for v in row] for row in rows])


def duckdb_with(*extensions):
    import duckdb

    con = duckdb.connect()
    for extension in extensions:
        pattern = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions", "*", "*", f"{extension}.duckdb_extension")
        found = glob.glob(pattern)
        if not found:
            raise RuntimeError(f"duckdb-ext-{extension} is not installed (pip install duckdb-ext-{extension})")
        con.execute(f"LOAD '{found[0]}'")
    return con


def with_duckdb(path, version):
    con = duckdb_with("delta")
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

    options = DELTA_S3 if S3 else None
    table = DeltaTable(path, storage_options=options) if version is None else DeltaTable(path, version=int(version), storage_options=options)
    # An arro3 table; pyarrow takes it through the Arrow C stream interface.
    result = pyarrow.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    return result.column_names, [tuple(r.values()) for r in result.to_pylist()]


def with_polars(path, version):
    import polars

    frame = polars.scan_delta(path, version=None if version is None else int(version), storage_options=DELTA_S3 if S3 else None).collect()
    return frame.columns, frame.rows()


def with_pyiceberg(metadata):
    from pyiceberg.table import StaticTable

    result = StaticTable.from_metadata(metadata, properties=ICEBERG_S3 if S3 else {}).scan().to_arrow()
    return result.column_names, [tuple(r.values()) for r in result.to_pylist()]


def with_duckdb_iceberg(metadata):
    con = duckdb_with("avro", "iceberg")
    result = con.execute("SELECT * FROM iceberg_scan(?)", [metadata])
    return [d[0] for d in result.description], result.fetchall()


def with_polars_iceberg(metadata):
    import polars

    if S3:
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(metadata, properties=ICEBERG_S3)
        frame = polars.scan_iceberg(table, storage_options={k.lower(): v for k, v in DELTA_S3.items()}).collect()
    else:
        frame = polars.scan_iceberg(metadata).collect()
    return frame.columns, frame.rows()


DELTA_READERS = [("duckdb", with_duckdb), ("deltalake", with_deltalake), ("polars", with_polars)]
ICEBERG_READERS = [("pyiceberg", with_pyiceberg), ("duckdb", with_duckdb_iceberg), ("polars", with_polars_iceberg)]


def run_reader(reader, args, sender):
    try:
        columns, rows = reader(*args)
        sender.send({"columns": list(columns), "rows": normalized(rows)})
    except Exception as error:  # reported, and the test fails on it
        sender.send({"error": f"{type(error).__name__}: {error}"})


def read_with(readers, *args):
    # Each reader in a forked child: a reader that crashes (one of them segfaults now
    # and then on a version whose files are gone) is reported as that reader's error
    # instead of taking the others down.
    import multiprocessing

    context = multiprocessing.get_context("fork")
    out = {}
    for name, reader in readers:
        if S3 and name == "duckdb":
            continue
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=run_reader, args=(reader, args, sender))
        child.start()
        sender.close()
        try:
            out[name] = receiver.recv()
        except EOFError:
            out[name] = None
        child.join()
        if out[name] is None:
            out[name] = {"error": f"the reader crashed (exit code {child.exitcode})"}
    return out


def read_table(path, version):
    return read_with(DELTA_READERS, path, version)


def read_cut(lake):
    # One consistent cut across tables: each table at the version the cut names.
    with open(os.path.join(lake, "_retina", "published", "latest.json")) as f:
        cut = json.load(f)
    tables = {}
    for t in cut["tables"]:
        tables[t["table"]] = {
            "delta": read_table(os.path.join(lake, t["delta_path"]), t["delta_version"]),
            "iceberg": read_with(ICEBERG_READERS, os.path.join(lake, t["iceberg_metadata"])),
        }
    return {"ts": cut["ts"], "tables": tables}


def absolute(path):
    return path if "://" in path else os.path.abspath(path)


def main():
    if sys.argv[1] == "--cut":
        print(json.dumps(read_cut(absolute(sys.argv[2]))))
    elif sys.argv[1] == "--iceberg":
        print(json.dumps(read_with(ICEBERG_READERS, absolute(sys.argv[2]))))
    else:
        version = sys.argv[2] if len(sys.argv) > 2 else None
        print(json.dumps(read_table(absolute(sys.argv[1]), version)))


if __name__ == "__main__":
    main()
